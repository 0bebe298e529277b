"""A convolutional autoencoder with residual blocks: Conv2d(stride 2), GroupNorm,
GELU, a residual add, ConvTranspose2d, nn.Upsample(nearest), Conv1d with
padding="same" over channels, AvgPool2d, MSE training with RMSprop and StepLR."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional

    class ResBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.norm1 = nn.GroupNorm(2, c)
            self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
            self.norm2 = nn.GroupNorm(2, c)

        def forward(self, x):
            h = F.gelu(self.norm1(self.conv1(x)))
            h = self.norm2(self.conv2(h))
            return F.gelu(x + h)

    class AutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Conv2d(2, 4, 3, stride=2, padding=1), ResBlock(4),
                                     nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
            self.mix = nn.Conv1d(8, 8, kernel_size=3, padding="same")
            self.dec = nn.Sequential(nn.ConvTranspose2d(8, 4, 2, stride=2), ResBlock(4),
                                     nn.Upsample(scale_factor=2, mode="nearest"),
                                     nn.Conv2d(4, 2, 3, padding=1))

        def forward(self, x):
            z = self.enc(x)
            b, c, h, w = z.shape
            z = self.mix(z.flatten(2)).view(b, c, h, w)
            return self.dec(z), z

    rng = np.random.default_rng(15)
    x = torch.from_numpy(rng.standard_normal((3, 2, 8, 8)))
    model = AutoEncoder().double()
    shared.model(torch, "ae", model)
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, momentum=0.5)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    out = {"losses": []}
    for _step in range(4):
        recon, z = model(x)
        loss = F.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        out["losses"].append(loss.item())
    out["z_shape"] = list(z.shape)
    out["pooled"] = np_of(nn.AvgPool2d(2)(recon))
    out["grads"] = [np_of(p.grad) for p in model.parameters()]
    return out
