"""A small CNN (Conv2d, BatchNorm2d, MaxPool2d, Dropout(p=0), AdaptiveAvgPool2d,
Flatten) trained a few SGD-momentum steps; then eval-mode predictions."""

import numpy as np

from tests.port import np_of

RTOL = 1e-8


def run(torch, shared):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self, num_classes=3):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 4, kernel_size=3, padding=1),
                nn.BatchNorm2d(4),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
                nn.Conv2d(4, 8, 3, stride=1, padding=1, bias=False),
                nn.BatchNorm2d(8),
                nn.ReLU(),
                nn.Dropout(p=0.0),
            )
            self.pool = nn.AdaptiveAvgPool2d((1, 1))
            self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8, num_classes))

        def forward(self, x):
            x = self.features(x)
            x = self.pool(x)
            return self.classifier(x)

    rng = np.random.default_rng(3)
    images = torch.from_numpy(rng.standard_normal((8, 1, 8, 8)))
    targets = torch.from_numpy(rng.integers(0, 3, 8))
    model = Net().double()
    shared.model(torch, "cnn", model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4)
    out = {"losses": []}
    for _step in range(5):
        opt.zero_grad()
        logits = model(images)
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    model.eval()
    with torch.no_grad():
        probs = F.softmax(model(images), dim=1)
    out["probs"] = np_of(probs)
    out["pred"] = probs.argmax(1).tolist()
    sd = model.state_dict()
    out["running_mean"] = np_of(sd["features.1.running_mean"])
    out["running_var"] = np_of(sd["features.5.running_var"])
    out["num_batches"] = int(sd["features.1.num_batches_tracked"])
    out["keys"] = list(sd.keys())
    return out
