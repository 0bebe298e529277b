"""Penn-Treebank-format trees and the Stanford Sentiment Treebank (SST).

Each line of an SST file is one tree such as ``(3 (2 The) (4 (2 very) (4 good)))``:
every node carries a sentiment label 0..4, leaves carry a word.  The data is
read where it lies (``../shared/data/sst`` next to the project by default);
it is never copied into the repository.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator

from ..dataset import Dataset

__all__ = ["Tree", "parse_tree", "read_trees", "SST", "TreeFormatError"]

# Words are separated by ASCII whitespace only: SST has words such as "8\xa01\/2" that
# contain a no-break space, which ``\s`` (Unicode) would split.
_TOKEN = re.compile(r"\(|\)|[^ \t\n\r\f\v()]+")


class TreeFormatError(ValueError):
    """A malformed tree: names the file, line, column and what was expected."""


class Tree:
    """A labelled constituency tree node: ``label`` (int), ``children`` (list of Tree),
    and ``word`` (str) for leaves.

    >>> t = dg.data.datasets.parse_tree("(3 (2 The) (4 good))")
    >>> t.label, t.leaves(), [n.label for n in t.postorder()]
    (3, ['The', 'good'], [2, 4, 3])
    """

    __slots__ = ("label", "children", "word")

    def __init__(self, label: int, children: list[Tree] | None = None, word: str | None = None) -> None:
        self.label = label
        self.children = children if children is not None else []
        self.word = word

    @property
    def is_leaf(self) -> bool:
        return self.word is not None

    def leaves(self) -> list[str]:
        """The words, left to right."""
        return [n.word for n in self.postorder() if n.word is not None]

    def postorder(self) -> Iterator[Tree]:
        """Children before parents (the order a Tree-LSTM evaluates nodes); iterative, any depth."""
        stack: list[tuple[Tree, bool]] = [(self, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded or node.word is not None:
                yield node
            else:
                stack.append((node, True))
                stack.extend((c, False) for c in reversed(node.children))

    def __len__(self) -> int:
        """Number of nodes."""
        return sum(1 for _ in self.postorder())

    def depth(self) -> int:
        best, stack = 0, [(self, 1)]
        while stack:
            node, d = stack.pop()
            best = max(best, d)
            stack.extend((c, d + 1) for c in node.children)
        return best

    def __str__(self) -> str:
        """The tree in PTB format again (``parse_tree(str(t))`` reproduces ``t``)."""
        out: list[str] = []
        stack: list = [self]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
            elif item.word is not None:
                out.append(f"({item.label} {item.word})")
            else:
                out.append(f"({item.label} ")
                stack.append(")")
                for i, c in enumerate(reversed(item.children)):
                    stack.append(c)
                    if i < len(item.children) - 1:
                        stack.append(" ")
        return "".join(out)

    def __repr__(self) -> str:
        text = str(self)
        return f"Tree({text if len(text) < 80 else text[:77] + '...'})"


def parse_tree(text: str, source: str = "<string>", line: int = 1) -> Tree:
    """Parse one PTB-format tree with integer node labels.  Errors name ``source``, ``line``,
    the column, and what was expected.

    >>> dg.data.datasets.parse_tree("(1 (2 not) (0 bad))").label
    1
    """
    def fail(pos: int, what: str):
        found = repr(text[pos:pos + 12]) if pos < len(text) else "end of line"
        raise TreeFormatError(f"{source}:{line}: column {pos + 1}: expected {what}, found {found}")

    tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
    if not tokens:
        fail(0, "a tree starting with '('")
    stack: list[Tree] = []
    root = None
    i, n = 0, len(tokens)
    while i < n:
        tok, pos = tokens[i]
        if tok == "(":
            if root is not None:
                fail(pos, "end of line after the complete tree")
            if i + 1 >= n:
                fail(len(text), "a label after '('")
            lab, lpos = tokens[i + 1]
            if not lab.lstrip("-").isdigit():
                fail(lpos, "an integer label after '('")
            node = Tree(int(lab))
            i += 2
            if i + 1 < n and tokens[i][0] not in "()" and tokens[i + 1][0] == ")":
                node.word = tokens[i][0]          # a leaf: (label word)
                i += 1
            elif i < n and tokens[i][0] not in "()":
                fail(tokens[i][1], "')' after the word of a leaf (a leaf holds exactly one word)")
            if stack:
                stack[-1].children.append(node)
            stack.append(node)
        elif tok == ")":
            if not stack:
                fail(pos, "'(' (unbalanced ')')")
            node = stack.pop()
            if node.word is None and not node.children:
                fail(pos, "a word or child trees before ')'")
            if not stack:
                root = node
            i += 1
        else:
            fail(pos, "'(' or ')' (a word must be inside a leaf like '(2 word)')")
    if stack:
        fail(len(text), f"{len(stack)} more ')' to close the tree")
    return root


def read_trees(path: str | os.PathLike) -> list[Tree]:
    """All trees of a PTB-format file, one per non-empty line."""
    path = os.fspath(path)
    trees = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            text = raw.strip()
            if text:
                trees.append(parse_tree(text, path, lineno))
    return trees


def _default_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))                      # dyngraph/data/datasets
    project = os.path.dirname(os.path.dirname(os.path.dirname(here)))     # the project root
    return os.path.normpath(os.path.join(project, "..", "shared", "data", "sst"))


class SST(Dataset):
    """The Stanford Sentiment Treebank: one labelled ``Tree`` per sample.

    ``root`` defaults to ``../shared/data/sst`` relative to the project root;
    ``split`` is ``"train"``, ``"dev"`` (alias ``"validation"``) or ``"test"``.

    >>> train = dg.data.datasets.SST(split="train")
    >>> tree = train[0]; tree.label, tree.leaves()[:3]
    (3, ['The', 'Rock', 'is'])
    """

    splits = {"train": "train.txt", "dev": "dev.txt", "validation": "dev.txt", "test": "test.txt"}

    def __init__(self, root: str | os.PathLike | None = None, split: str = "train",
                 transform: Callable | None = None) -> None:
        if split not in self.splits:
            raise ValueError(f"SST: split must be one of {sorted(self.splits)}, got {split!r}")
        self.root = os.fspath(root) if root is not None else _default_root()
        path = os.path.join(self.root, self.splits[split])
        if not os.path.exists(path):
            raise FileNotFoundError(f"SST: {path!r} not found; pass root= pointing at the directory holding "
                                    "train.txt, dev.txt and test.txt")
        self.split = split
        self.transform = transform
        self.trees = read_trees(path)

    def __len__(self) -> int:
        return len(self.trees)

    def __getitem__(self, i: int):
        tree = self.trees[i]
        return self.transform(tree) if self.transform is not None else tree

    def vocab(self) -> dict[str, int]:
        """Word → index over this split's leaves, in order of first appearance."""
        out: dict[str, int] = {}
        for t in self.trees:
            for w in t.leaves():
                out.setdefault(w, len(out))
        return out

    def __repr__(self) -> str:
        return f"SST(split={self.split!r}, n={len(self)})"
