"""Optimizers and learning-rate schedulers (``torch.optim``'s surface).

>>> opt = dg.optim.Adam(model.parameters(), lr=1e-3)
>>> sched = dg.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
"""

from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
           "lr_scheduler"]
__all__ += ["LBFGS", "RAdam", "Rprop", "ASGD"]


def __getattr__(name):
    # ``swa_utils`` needs dg.nn (AveragedModel is a Module): imported on first use.
    if name == "swa_utils":
        import importlib  # noqa: PLC0415  (swa_utils imports dg.nn, which imports optim)

        return importlib.import_module(".swa_utils", __name__)
    raise AttributeError(f"module 'dyngraph.optim' has no attribute {name!r}")
