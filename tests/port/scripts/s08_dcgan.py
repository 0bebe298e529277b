"""A DCGAN on synthetic 16x16 images, in the layout of the classic example: ``weights_init``
dispatching on ``classname.find('Conv')``, ``ConvTranspose2d`` generator with ``BatchNorm2d``
and ``ReLU(True)``, ``LeakyReLU(0.2, inplace=True)`` discriminator, ``BCELoss`` with
``torch.full`` labels and ``label.fill_``, two Adams with ``betas=(0.5, 0.999)``, ``detach()``
for the discriminator step, a fixed noise batch, checkpoints of both nets.

    python s08_dcgan.py --niter 1 --noise numpy --out dcgan.json
"""

import argparse
import json
import random

import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim
import torch.utils.data


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, nz, ngf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ndf, nc):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batchSize", type=int, default=8)
    parser.add_argument("--nz", type=int, default=8)
    parser.add_argument("--ngf", type=int, default=4)
    parser.add_argument("--ndf", type=int, default=4)
    parser.add_argument("--niter", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--manualSeed", type=int, default=999)
    parser.add_argument("--noise", choices=["torch", "numpy"], default="torch")
    parser.add_argument("--out", default=None)
    opt = parser.parse_args()
    random.seed(opt.manualSeed)
    torch.manual_seed(opt.manualSeed)
    cudnn.benchmark = True
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(opt.manualSeed)
    images = np.tanh(rng.standard_normal((32, 1, 16, 16))).astype(np.float32)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(images))
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=opt.batchSize, shuffle=False, num_workers=0)

    def noise(n):
        if opt.noise == "torch":
            return torch.randn(n, opt.nz, 1, 1, device=device)
        return torch.from_numpy(rng.standard_normal((n, opt.nz, 1, 1)).astype(np.float32)).to(device)

    netG = Generator(opt.nz, opt.ngf, 1).to(device)
    netD = Discriminator(opt.ndf, 1).to(device)
    netG.apply(weights_init)
    netD.apply(weights_init)
    init = np.random.default_rng(0)      # replace the random init by a shared one
    with torch.no_grad():
        for net in (netG, netD):
            for name, prm in net.named_parameters():
                base = 1.0 if name.endswith("weight") and prm.dim() == 1 else 0.0
                prm.copy_(torch.from_numpy(base + init.normal(0, 0.02 if prm.dim() > 1 else 0.0, tuple(prm.shape))))
    criterion = nn.BCELoss()
    fixed_noise = noise(4)
    real_label, fake_label = 1, 0
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    history = []
    for _ in range(opt.niter):
        for data in dataloader:
            netD.zero_grad()
            real_cpu = data[0].to(device)
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()
            fake = netG(noise(batch_size))
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            history.append([errD.item(), errG.item(), D_x, D_G_z1, D_G_z2])
    torch.save(netG.state_dict(), "netG_epoch_0.pth")
    torch.save(netD.state_dict(), "netD_epoch_0.pth")
    netG.load_state_dict(torch.load("netG_epoch_0.pth"))
    with torch.no_grad():
        sample = netG(fixed_noise).detach()
    result = {"history": history, "sample_shape": list(sample.shape), "sample_mean": sample.mean().item(),
              "running_var": netD.main[3].running_var.tolist()}
    if args_out := opt.out:
        with open(args_out, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
