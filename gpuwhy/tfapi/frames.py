"""The user's line on the Python stack: the first frame outside TF, Keras and gpuwhy.

Used by the run hooks to say *where* something happened (the ``model.fit`` call, the
``for`` loop over a dataset). The library/user decision is cached per code object, so
a lookup costs a short walk up the stack and a few dict hits.
"""

from __future__ import annotations

import sys
from types import FrameType

from gpuwhy.tfapi.graph_ops import is_library_file, relative

_IS_LIBRARY: dict[object, bool] = {}


def user_location(skip: int = 2, limit: int = 64) -> str | None:
    """``file:line`` of the nearest user frame above the caller, or None."""
    frame: FrameType | None = sys._getframe(skip)
    for _ in range(limit):
        if frame is None:
            return None
        code = frame.f_code
        library = _IS_LIBRARY.get(code)
        if library is None:
            library = _IS_LIBRARY[code] = is_library_file(code.co_filename)
        if not library:
            return relative(code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None
