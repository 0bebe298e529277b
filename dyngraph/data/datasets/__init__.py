"""Bundled and file-based datasets: scikit-learn's digits, MNIST / Fashion-MNIST (IDX), SST trees.

>>> train = dg.data.datasets.digits("train")
>>> fmnist = dg.data.datasets.FashionMNIST(train=False, transform=dg.data.transforms.ToTensor())
>>> trees = dg.data.datasets.SST(split="dev")
"""

from .digits import Digits, digits
from .idx import MNIST, FashionMNIST, IDXError, read_idx
from .sst import SST, Tree, TreeFormatError, parse_tree, read_trees

__all__ = ["Digits", "digits", "MNIST", "FashionMNIST", "IDXError", "read_idx", "SST", "Tree",
           "TreeFormatError", "parse_tree", "read_trees"]
