"""MobileNet/ResNet-style blocks: depthwise (groups=channels) and dilated convs,
1x1 pointwise convs, squeeze-and-excitation gating, Hardswish, `out += identity`
in place on a non-leaf, ReLU(inplace=True), BatchNorm in train then eval mode,
bilinear F.interpolate, ConvTranspose2d with output_padding."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional

    class SE(nn.Module):
        def __init__(self, c, r=2):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Sequential(nn.Linear(c, c // r), nn.ReLU(inplace=True), nn.Linear(c // r, c), nn.Sigmoid())

        def forward(self, x):
            b, c, _, _ = x.size()
            w = self.fc(self.pool(x).view(b, c)).view(b, c, 1, 1)
            return x * w.expand_as(x)

    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 3, padding=2, dilation=2, groups=c, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.pw = nn.Conv2d(c, c, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c, momentum=0.2)
            self.se = SE(c)
            self.act = nn.Hardswish()

        def forward(self, x):
            identity = x
            out = self.act(self.bn1(self.dw(x)))
            out = self.se(self.bn2(self.pw(out)))
            out += identity
            return F.relu(out, inplace=True)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 6, 3, stride=2, padding=1)
            self.blocks = nn.Sequential(Block(6), Block(6))
            self.up = nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1)
            self.head = nn.Conv2d(4, 2, 1)

        def forward(self, x):
            h = self.blocks(F.relu(self.stem(x)))
            seg = self.head(self.up(h))
            return F.interpolate(seg, size=(10, 10), mode="bilinear", align_corners=False)

    rng = np.random.default_rng(26)
    x = torch.from_numpy(rng.standard_normal((2, 3, 8, 8)))
    target = torch.from_numpy(rng.integers(0, 2, (2, 10, 10)))
    model = Net().double()
    shared.model(torch, "net", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(x), target)     # per-pixel classes: (N, C, H, W) vs (N, H, W)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        seg = model(x)
        ac = F.interpolate(seg, scale_factor=0.5, mode="bilinear", align_corners=True)
    return {"losses": losses, "seg": np_of(seg), "ac": np_of(ac),
            "bn": np_of(model.blocks[1].bn2.running_var), "grads": [np_of(p.grad) for p in model.parameters()]}
