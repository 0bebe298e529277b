"""``torch.hub`` without downloads and without running repository code.

PyTorch's hub fetches a GitHub repository and executes its ``hubconf.py`` to build a
model.  dyngraph never executes code that comes from a file and has no network access
of its own, so the model-building entry points (:func:`load`, :func:`list`, :func:`help`)
raise :class:`HubUnsupportedError`, which says what to do instead: build the model with
the program's own class and load weights into it.

Weights themselves are data, so :func:`load_state_dict_from_url` works offline: it
looks for the file PyTorch's hub would have cached (``<hub dir>/checkpoints/<file name>``,
or ``model_dir``) and reads it with ``dg.load`` when it is a safetensors checkpoint.
Nothing is downloaded; a missing file raises an error naming the path to put it at.

>>> sd = dg.hub.load_state_dict_from_url("https://host/resnet18.safetensors")  # from the cache
>>> model.load_state_dict(sd)
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from .serialization import load as _load

__all__ = ["HubUnsupportedError", "load", "list", "help", "load_state_dict_from_url",
           "download_url_to_file", "get_dir", "set_dir"]

_HUB_DIR: str | None = None


class HubUnsupportedError(RuntimeError):
    """A ``torch.hub`` call that would download or execute repository code."""


def get_dir() -> str:
    """The hub cache directory: ``set_dir``'s value, else ``$TORCH_HOME/hub``, else
    ``$XDG_CACHE_HOME/torch/hub`` (``~/.cache/torch/hub``), as in PyTorch.

    >>> dg.hub.get_dir()
    '/home/me/.cache/torch/hub'
    """
    if _HUB_DIR is not None:
        return _HUB_DIR
    torch_home = os.environ.get("TORCH_HOME")
    if torch_home is None:
        cache = os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
        torch_home = os.path.join(cache, "torch")
    return os.path.join(os.path.expanduser(torch_home), "hub")


def set_dir(d: str | os.PathLike) -> None:
    """Set the hub cache directory (``load_state_dict_from_url`` looks in ``<d>/checkpoints``).

    >>> dg.hub.set_dir("/data/weights")
    """
    global _HUB_DIR
    _HUB_DIR = os.path.expanduser(os.fspath(d))


def _refuse(call: str, repo_or_dir) -> HubUnsupportedError:
    return HubUnsupportedError(
        f"torch.hub.{call}({repo_or_dir!r}): dyngraph does not download repositories and never "
        "executes code from files (torch.hub runs the repository's hubconf.py). Define the model "
        "class in your program, build it, and load its weights with model.load_state_dict(...) "
        "from a safetensors file (dg.load, or dg.hub.load_state_dict_from_url for a file already "
        "in the hub cache)")


def load(repo_or_dir, model, *args, source: str = "github", trust_repo=None, force_reload: bool = False,
         verbose: bool = True, skip_validation: bool = False, **kwargs):
    """Refused: building a hub model means executing the repository's ``hubconf.py``.

    >>> dg.hub.load("pytorch/vision", "resnet18")
    Traceback (most recent call last):
    HubUnsupportedError: torch.hub.load('pytorch/vision'): dyngraph does not download ...
    """
    raise _refuse("load", repo_or_dir)


def list(github, force_reload: bool = False, skip_validation: bool = False, trust_repo=None,
         verbose: bool = True):
    """Refused: listing entry points means executing the repository's ``hubconf.py``."""
    raise _refuse("list", github)


def help(github, model, force_reload: bool = False, skip_validation: bool = False,
         trust_repo=None):
    """Refused: an entry point's docstring lives in the repository's ``hubconf.py``."""
    raise _refuse("help", github)


def download_url_to_file(url: str, dst: str, hash_prefix=None, progress: bool = True) -> None:
    """Refused: dyngraph does not download.  Fetch the file with another tool."""
    raise HubUnsupportedError(
        f"torch.hub.download_url_to_file({url!r}, {dst!r}): dyngraph does not download files; "
        "fetch it with another tool and load it from disk")


def load_state_dict_from_url(url: str, model_dir: str | None = None, map_location=None, progress: bool = True,
                             check_hash: bool = False, file_name: str | None = None,
                             weights_only: bool = True) -> dict:
    """The state dict PyTorch's hub would load for ``url``, read from the local cache.

    The file is looked for where ``torch.hub`` caches it: ``model_dir`` (default
    ``get_dir()/checkpoints``) joined with ``file_name`` or the URL's last path part.
    It is read with ``dg.load``, so it must be a safetensors checkpoint (a PyTorch
    ``.pth`` pickle is refused with an explanation).  Nothing is downloaded.

    >>> sd = dg.hub.load_state_dict_from_url("https://host/w/net.safetensors", model_dir="weights")
    """
    directory = model_dir if model_dir is not None else os.path.join(get_dir(), "checkpoints")
    name = file_name or os.path.basename(urlparse(url).path)
    path = os.path.join(os.path.expanduser(directory), name)
    if not os.path.isfile(path):
        raise HubUnsupportedError(
            f"torch.hub.load_state_dict_from_url({url!r}): {path} does not exist and dyngraph does not "
            "download; put the checkpoint (as safetensors) there, or load it with dg.load")
    return _load(path, map_location=map_location, weights_only=weights_only)

