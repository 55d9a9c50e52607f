"""Images as context: figures, PIL images and PNG/JPEG bytes, bounded in size.

Every image leaves as a :class:`ContextImage` (PNG or JPEG bytes, base64, with
its size in pixels), its longer side at most ``max_side`` pixels, so a figure
saved at a high dpi or a camera photo never floods the request. matplotlib
and PIL objects are drawn with their own library (the object is theirs, so
the library is already imported); raw bytes that need shrinking are shrunk
with Pillow when it is installed, else sent only if already small enough.
"""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

from ..base.content import ContextImage
from ..base.errors import InputError
from ._trust import figure_of, module_of

MAX_SIDE = 1024
_MAX_RAW_BYTES = 4 * 1024 * 1024
_PNG = b"\x89PNG\r\n\x1a\n"
_JPEG = b"\xff\xd8\xff"


def is_image(obj: object) -> bool:
    """Whether :func:`image_of` can turn ``obj`` into an image."""
    return _kind(obj) is not None


def image_of(obj: object, max_side: int = MAX_SIDE) -> ContextImage:
    """``obj`` (a matplotlib Figure or Axes, a PIL image, PNG/JPEG bytes) as a bounded image."""
    kind = _kind(obj)
    if kind == "figure":
        return _figure_png(obj, max_side)
    if kind == "pil":
        return _pil_png(obj, max_side)
    if kind == "bytes":
        return _raw(_bytes_of(obj), max_side)
    raise InputError(
        f"{type(obj).__name__} is not an image; pass a matplotlib figure, a PIL image, "
        f"IPython.display.Image or PNG/JPEG bytes"
    )


def _kind(obj: object) -> str | None:
    module = module_of(type(obj))
    if module.startswith("matplotlib.") and figure_of(obj) is not None:
        return "figure"
    if module.startswith("PIL.") and hasattr(obj, "thumbnail") and hasattr(obj, "save"):
        return "pil"
    data = _bytes_of(obj)
    if data is not None and (data.startswith(_PNG) or data.startswith(_JPEG)):
        return "bytes"
    return None


def _bytes_of(obj: object) -> Any:
    """The bytes of raw data or of an ``IPython.display.Image``-like object (``.data``)."""
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj)
    data = getattr(obj, "data", None) if module_of(type(obj)).startswith("IPython.") else None
    return bytes(data) if isinstance(data, (bytes, bytearray)) else None



def _figure_png(obj: object, max_side: int) -> ContextImage:
    figure = figure_of(obj)
    width_in, height_in = figure.get_size_inches()
    dpi = min(float(figure.dpi), max_side / max(width_in, height_in, 1e-6))
    buffer = io.BytesIO()
    # Fast compression: the draw already costs tens of ms, the request carries it once.
    figure.savefig(buffer, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return _encoded("image/png", buffer.getvalue())


def _pil_png(image: Any, max_side: int) -> ContextImage:
    small = image.copy()
    small.thumbnail((max_side, max_side))
    if small.mode not in ("RGB", "RGBA", "L", "LA", "P"):
        small = small.convert("RGBA")
    buffer = io.BytesIO()
    small.save(buffer, format="PNG")
    return _encoded("image/png", buffer.getvalue())


def _raw(data: bytes, max_side: int) -> ContextImage:
    mime = "image/png" if data.startswith(_PNG) else "image/jpeg"
    width, height = image_size(data)
    if max(width, height) <= max_side and len(data) <= _MAX_RAW_BYTES:
        return ContextImage(mime, base64.b64encode(data).decode("ascii"), width, height)
    try:
        from PIL import Image
    except ImportError:
        raise InputError(
            f"the image is {width}×{height} pixels ({len(data):,} bytes), larger than "
            f"{max_side} pixels a side; install Pillow to have it shrunk, or pass a smaller one"
        ) from None
    return _pil_png(Image.open(io.BytesIO(data)), max_side)


def _encoded(mime: str, data: bytes) -> ContextImage:
    width, height = image_size(data)
    return ContextImage(mime, base64.b64encode(data).decode("ascii"), width, height)


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) read from a PNG or JPEG header; (0, 0) when it cannot be read."""
    if data.startswith(_PNG) and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data.startswith(_JPEG):
        return _jpeg_size(data)
    return 0, 0


def _jpeg_size(data: bytes) -> tuple[int, int]:
    position = 2
    while position + 9 < len(data):
        if data[position] != 0xFF:
            return 0, 0
        marker = data[position + 1]
        length = struct.unpack(">H", data[position + 2 : position + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return int(width), int(height)
        position += 2 + length
    return 0, 0
