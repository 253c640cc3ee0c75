"""``make run``'s static files: collected when they changed, not at every start.

Django set up first (``scripts/run.py`` calls it after ``django.setup()``).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sources() -> str:
    """A fingerprint of what collectstatic would collect: the storage, and each source
    file's place, size and modification time."""
    from django.conf import settings
    from django.contrib.staticfiles import finders

    digest = hashlib.sha256(repr(settings.STORAGES["staticfiles"]).encode())
    for finder in finders.get_finders():
        for path, storage in finder.list([]):
            info = os.stat(storage.path(path))
            digest.update(
                f"{storage.location}\0{path}\0{info.st_size}\0{info.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


def collect(say) -> None:
    """collectstatic, unless nothing changed since it last ran: with the manifest storage
    it hashes and compresses every file again, the longest step of a second `make run`
    (bench/local_model.py --again). The stamp lives among the collected files, so that
    emptying STATIC_ROOT collects again."""
    from django.conf import settings
    from django.core.management import call_command

    stamp = Path(settings.STATIC_ROOT) / ".collected-from"
    found = sources()
    if stamp.is_file() and stamp.read_text() == found:
        return
    say("collecting static files")
    call_command("collectstatic", interactive=False, verbosity=0)
    stamp.write_text(found)
