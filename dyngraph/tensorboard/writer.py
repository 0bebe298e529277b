"""``SummaryWriter``: PyTorch's ``torch.utils.tensorboard.SummaryWriter`` for dyngraph.

Event files are written with tensorboardX's event-file writer (the record
format TensorBoard reads); the summaries themselves (scalars, histograms,
PNG images, text, hparams, graphs) are built here from NumPy arrays, so
``dg.Tensor``, NumPy arrays and Python numbers are all accepted.

>>> with dg.tensorboard.SummaryWriter("runs/exp1") as w:
...     for step in range(100):
...         w.add_scalar("loss", loss.item(), step)
...     w.add_graph(model, x)       # the graph of one dynamic step
"""

from __future__ import annotations

import os
import socket
import struct
import time
import zlib
from datetime import datetime

import numpy as np

from .graph import graph_def

__all__ = ["SummaryWriter"]


def _tbx():
    try:
        from tensorboardX import FileWriter  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)
        from tensorboardX.proto import event_pb2, summary_pb2  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "dg.tensorboard needs tensorboardX: pip install tensorboardX "
            "(or pip install 'dyngraph[viz]')") from exc
    return FileWriter, event_pb2, summary_pb2


def _np(x) -> np.ndarray:
    if hasattr(x, "_data") and hasattr(x, "detach"):
        x = x.detach()._data
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
        x = x.get()
    return np.asarray(x)


def _scalar(x) -> float:
    a = _np(x)
    if a.size != 1:
        raise ValueError(f"add_scalar: scalar_value must have one element, got shape {list(a.shape)}")
    return float(a.reshape(()))


def _png(hwc: np.ndarray) -> bytes:
    """Encode an ``HxWxC`` uint8 array (C = 1, 3 or 4) as PNG, with zlib only."""
    h, w, c = hwc.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + hwc[i].tobytes() for i in range(h))

    def chunk(tag, data):
        body = tag + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _to_hwc(img: np.ndarray, dataformats: str) -> np.ndarray:
    fmt = dataformats.upper()
    if len(set(fmt)) != len(fmt) or set(fmt) - set("NCHW"):
        raise ValueError(f"add_image: invalid dataformats {dataformats!r} (use e.g. 'CHW', 'HWC', 'HW')")
    if img.ndim != len(fmt):
        raise ValueError(
            f"add_image: image of shape {list(img.shape)} does not match dataformats {dataformats!r}")
    if fmt == "NCHW" or fmt == "NHWC":
        img = img.transpose([fmt.index(ch) for ch in "NHWC"])
        n, h, w, c = img.shape
        cols = int(np.ceil(np.sqrt(n)))
        rows = int(np.ceil(n / cols))
        grid = np.zeros((rows * h, cols * w, c), img.dtype)
        for i in range(n):
            r, q = divmod(i, cols)
            grid[r * h:(r + 1) * h, q * w:(q + 1) * w] = img[i]
        img = grid
    elif len(fmt) == 3:
        img = img.transpose([fmt.index(ch) for ch in "HWC"])
    elif fmt in ("HW", "WH"):
        img = img.transpose([fmt.index(ch) for ch in "HW"])[:, :, None]
    if img.shape[2] not in (1, 3, 4):
        raise ValueError(f"add_image: an image needs 1, 3 or 4 channels, got {img.shape[2]}")
    if img.dtype != np.uint8:
        img = (np.clip(img.astype(np.float64), 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    return np.ascontiguousarray(img)


def _tf_buckets() -> np.ndarray:
    """TensorFlow's default histogram bucket edges (exponential, +-1e-12 .. 1e20)."""
    v, pos = 1e-12, []
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos = np.asarray(pos)
    return np.concatenate([-pos[::-1], [0.0], pos, [np.inf]])


class SummaryWriter:
    """Write TensorBoard event files (PyTorch's names and signatures).

    Args:
        log_dir: directory; default ``runs/<date>_<host><comment>``.
        comment: suffix of the default ``log_dir`` (ignored when ``log_dir`` is given).
        purge_step: hide events at or after this step from a crashed earlier run.
        max_queue: events queued before a write is forced.
        flush_secs: seconds between automatic flushes.
        filename_suffix: suffix of the event file's name.
    """

    def __init__(self, log_dir: str | None = None, comment: str = "", purge_step: int | None = None,
                 max_queue: int = 10, flush_secs: int = 120, filename_suffix: str = ""):
        if not log_dir:
            stamp = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = os.fspath(log_dir)
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        self._writer = None
        self._sub_writers: dict = {}
        self._get_file_writer()

    # -- plumbing ------------------------------------------------------------------
    def _get_file_writer(self):
        if self._writer is None:
            FileWriter, event_pb2, _ = _tbx()
            self._writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs,
                                      self.filename_suffix)
            if self.purge_step is not None:
                ev = event_pb2.Event(step=self.purge_step, file_version="brain.Event:2")
                self._writer.add_event(ev)
                sl = event_pb2.SessionLog(status=event_pb2.SessionLog.START)
                self._writer.add_event(event_pb2.Event(step=self.purge_step, session_log=sl))
                self.purge_step = None
        return self._writer

    def get_logdir(self) -> str:
        return self.log_dir

    def _add(self, summary, global_step, walltime, writer=None):
        w = writer or self._get_file_writer()
        _, event_pb2, _ = _tbx()
        ev = event_pb2.Event(summary=summary)
        ev.wall_time = time.time() if walltime is None else walltime
        if global_step is not None:
            ev.step = int(global_step)
        w.add_event(ev)

    @staticmethod
    def _summary(**value):
        _, _, summary_pb2 = _tbx()
        return summary_pb2.Summary(value=[summary_pb2.Summary.Value(**value)])

    # -- scalars -------------------------------------------------------------------
    def add_scalar(self, tag: str, scalar_value, global_step: int | None = None,
                   walltime: float | None = None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log one number: ``w.add_scalar("loss", 0.25, step)``."""
        self._add(self._summary(tag=tag, simple_value=_scalar(scalar_value)), global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Several curves in one chart: one run ``<log_dir>/<main_tag>_<tag>`` per entry.

        >>> w.add_scalars("loss", {"train": 0.3, "val": 0.4}, step)
        """
        walltime = time.time() if walltime is None else walltime
        FileWriter = _tbx()[0]
        for tag, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, f"{main_tag}_{tag}".replace("/", "_"))
            w = self._sub_writers.get(path)
            if w is None:
                w = self._sub_writers[path] = FileWriter(path, self.max_queue, self.flush_secs,
                                                         self.filename_suffix)
            self._add(self._summary(tag=main_tag, simple_value=_scalar(value)), global_step,
                      walltime, writer=w)

    # -- histograms ----------------------------------------------------------------
    def add_histogram(self, tag: str, values, global_step: int | None = None,
                      bins="tensorflow", walltime: float | None = None, max_bins=None) -> None:
        """Distribution of ``values``; ``bins`` is ``"tensorflow"`` or anything ``np.histogram`` takes."""
        _, _, summary_pb2 = _tbx()
        v = _np(values).astype(np.float64).ravel()
        if v.size == 0:
            raise ValueError(f"add_histogram: '{tag}' got an empty array")
        if not np.isfinite(v).all():
            raise ValueError(f"add_histogram: '{tag}' contains NaN or Inf values")
        if isinstance(bins, str) and bins == "tensorflow":
            edges = _tf_buckets()
            counts = np.bincount(np.searchsorted(edges, v, side="left"), minlength=len(edges))
            counts = counts[: len(edges)]
            limits = edges
        else:
            counts, e = np.histogram(v, bins=bins)
            limits = e[1:]
        if max_bins is not None and len(counts) > max_bins:
            sub = int(np.ceil(len(counts) / max_bins))
            pad = (-len(counts)) % sub
            counts = np.concatenate([counts, np.zeros(pad, counts.dtype)]).reshape(-1, sub).sum(1)
            limits = np.concatenate([limits, np.repeat(limits[-1], pad)]).reshape(-1, sub)[:, -1]
        nz = np.flatnonzero(counts)
        lo, hi = max(0, nz[0] - 1), min(len(counts), nz[-1] + 2)
        hist = summary_pb2.HistogramProto(
            min=float(v.min()), max=float(v.max()), num=int(v.size), sum=float(v.sum()),
            sum_squares=float(np.dot(v, v)), bucket_limit=[float(x) for x in limits[lo:hi]],
            bucket=[float(x) for x in counts[lo:hi]])
        self._add(self._summary(tag=tag, histo=hist), global_step, walltime)

    # -- images --------------------------------------------------------------------
    def add_image(self, tag: str, img_tensor, global_step: int | None = None,
                  walltime: float | None = None, dataformats: str = "CHW") -> None:
        """One image: floats in [0, 1] or uint8; ``dataformats`` ``"CHW"``, ``"HWC"``, ``"HW"``."""
        _, _, summary_pb2 = _tbx()
        hwc = _to_hwc(_np(img_tensor), dataformats)
        if hwc.shape[2] == 1:
            hwc = np.repeat(hwc, 3, axis=2)
        h, w, c = hwc.shape
        img = summary_pb2.Summary.Image(height=h, width=w, colorspace=c,
                                        encoded_image_string=_png(hwc))
        self._add(self._summary(tag=tag, image=img), global_step, walltime)

    def add_images(self, tag: str, img_tensor, global_step: int | None = None,
                   walltime: float | None = None, dataformats: str = "NCHW") -> None:
        """A batch of images, tiled into one grid."""
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    # -- text and hparams ------------------------------------------------------------
    def add_text(self, tag: str, text_string: str, global_step: int | None = None,
                 walltime: float | None = None) -> None:
        """Markdown text, shown in TensorBoard's Text tab."""
        from tensorboardX.summary import text  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)

        self._add(text(tag, str(text_string)), global_step, walltime)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete=None,
                    run_name: str | None = None, global_step: int | None = None) -> None:
        """One hyper-parameter session: its values and final metrics (HParams tab).

        Written to the sub-run ``<log_dir>/<run_name>`` (default: the current time),
        like PyTorch.
        """
        from tensorboardX.proto.api_pb2 import Interval  # noqa: PLC0415,F401
        from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)
        from tensorboardX.summary import hparams  # noqa: PLC0415  (tensorboardX: optional dependency, imported on first use)

        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("add_hparams: hparam_dict and metric_dict must be dicts")
        clean = {k: (v.item() if hasattr(v, "item") else v) for k, v in hparam_dict.items()}
        exp, ssi, sei = hparams(clean, metric_dict)
        if hparam_domain_discrete:
            data = HParamsPluginData.FromString(exp.value[0].metadata.plugin_data.content)
            for info in data.experiment.hparam_infos:
                values = hparam_domain_discrete.get(info.name)
                if values is None:
                    continue
                for v in values:
                    item = info.domain_discrete.values.add()
                    if isinstance(v, bool):
                        item.bool_value = v
                    elif isinstance(v, (int, float)):
                        item.number_value = float(v)
                    else:
                        item.string_value = str(v)
            exp.value[0].metadata.plugin_data.content = data.SerializeToString()
        run_name = run_name or str(time.time())
        FileWriter = _tbx()[0]
        w = FileWriter(os.path.join(self.log_dir, run_name), self.max_queue, self.flush_secs,
                       self.filename_suffix)
        try:
            for s in (exp, ssi, sei):
                self._add(s, None, None, writer=w)
            for k, v in metric_dict.items():
                self._add(self._summary(tag=k, simple_value=_scalar(v)), global_step, None, writer=w)
        finally:
            w.close()

    # -- graph ---------------------------------------------------------------------
    def add_graph(self, model, input_to_model=None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """The graph of one forward step of ``model`` (TensorBoard's Graphs tab).

        No tracing step: the model runs once on ``input_to_model`` (a Tensor or a
        tuple of positional arguments) inside :func:`dyngraph.viz.record`, and the
        live graph it built -- with module scopes, shapes and dtypes -- becomes
        TensorBoard's ``GraphDef``.  A dynamic model's graph is the graph of that
        one step.
        """
        _, event_pb2, _ = _tbx()
        gd = graph_def(model, input_to_model)
        if verbose:
            print(gd)
        ev = event_pb2.Event(graph_def=gd.SerializeToString(), wall_time=time.time())
        self._get_file_writer().add_event(ev)

    # -- lifetime --------------------------------------------------------------------
    def flush(self) -> None:
        """Write pending events to disk."""
        if self._writer is not None:
            self._writer.flush()
        for w in self._sub_writers.values():
            w.flush()

    def close(self) -> None:
        """Flush and close the event files; a later ``add_*`` opens a new file."""
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
        for w in self._sub_writers.values():
            w.flush()
            w.close()
        self._sub_writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
