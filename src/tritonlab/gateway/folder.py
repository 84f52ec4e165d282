"""One gateway folder: the ``Gateway`` class and what it refuses (``tritonlab.gateway``'s text
says why). Standard library only."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from tritonlab.errors import ConfigError

_UMASK = os.umask(0)
os.umask(_UMASK)


class GatewayError(ConfigError):
    """A path a gateway refused: outside its root, through a link, or not the kind expected."""


def absolute_path(path: Path | str) -> Path:
    """``path`` made absolute and normalised lexically (no symlink is followed)."""
    return Path(os.path.abspath(os.fspath(path)))


def overlaps(a: Path | str, b: Path | str) -> bool:
    """Whether one of ``a`` and ``b`` is the other or lies inside it (symlinks resolved)."""
    ra, rb = Path(os.path.realpath(a)), Path(os.path.realpath(b))
    return ra == rb or ra.is_relative_to(rb) or rb.is_relative_to(ra)


def refuse_overlap(
    out: Path | str, inputs: dict[str, Path | str | None], out_option: str = "--out"
) -> None:
    """``GatewayError`` when the output folder ``out`` is, holds or lies inside an input, before
    anything is written; ``inputs`` maps each input's option to its path."""
    for option, path in inputs.items():
        if path is None:
            continue
        if overlaps(out, path):
            raise GatewayError(
                f"{out_option} {out} overlaps {option} {path}, which is only read (tritonlab "
                f"never writes it): the {out_option} folder is written and cleared, so it may "
                f"neither hold nor lie inside an input; choose a {out_option} folder apart from "
                "it (nothing was written)"
            )


class Gateway:
    """Writes, moves, links and deletes inside one root folder only (see the module text)."""

    def __init__(self, root: Path | str) -> None:
        given = absolute_path(root)
        # The root itself may be given through a link (the user chose it); below it, no link.
        self.root = Path(os.path.realpath(given))
        self.given = given

    def __repr__(self) -> str:
        return f"Gateway({str(self.root)!r})"

    # paths

    def path(self, path: Path | str) -> Path:
        """``path`` checked: inside the root, with no symbolic link at any part below it (the
        last part included). Returns it made absolute, under the resolved root."""
        absolute = absolute_path(path)
        for base in (self.given, self.root):
            if absolute == base or absolute.is_relative_to(base):
                relative = absolute.relative_to(base)
                break
        else:
            raise GatewayError(
                f"{path}: outside {self.given}, where this command may write; nothing there "
                "was changed"
            )
        current = self.root
        for part in relative.parts:
            current = current / part
            try:
                mode = os.lstat(current).st_mode
            except FileNotFoundError:
                break
            if stat.S_ISLNK(mode):
                raise GatewayError(
                    f"{current} is a symbolic link; tritonlab writes, moves and deletes only "
                    f"real files and folders inside {self.given}: remove the link and run the "
                    "same command again"
                )
        return self.root / relative

    # folders

    def mkdir(self, path: Path | str, mode: int = 0o777) -> Path:
        """Create ``path`` and its missing parents below the root (the root too), part by part,
        refusing a link or a file where a folder should be."""
        target = self.path(path)
        parts = target.relative_to(self.root).parts
        chain = [self.root, *(self.root.joinpath(*parts[: i + 1]) for i in range(len(parts)))]
        for folder in chain:
            try:
                os.mkdir(folder, mode)
            except FileExistsError:
                pass
            except FileNotFoundError:
                os.makedirs(folder, mode, exist_ok=True)  # the root's own parents
            info = os.lstat(folder)
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
                raise GatewayError(
                    f"{folder} is not a folder (a file or a link is in the way); move it and "
                    "run the same command again"
                )
        return Path(path)

    def private_temp(self, prefix: str) -> Path:
        """A new folder under the root only this user may enter (``mkdtemp``, mode 0700)."""
        self.mkdir(self.root)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))

    # files

    def write_bytes(self, path: Path | str, data: bytes, mode: int | None = None) -> Path:
        """Write ``data`` as ``path``: a new file beside it, then a rename over the name, so a
        reader never sees half and no other name of an old file is written through."""
        return self.write_with(path, lambda handle: handle.write(data), binary=True, mode=mode)

    def write_text(self, path: Path | str, text: str, mode: int | None = None) -> Path:
        """Write ``text`` (UTF-8) as ``path``, the same way as ``write_bytes``."""
        return self.write_bytes(path, text.encode("utf-8"), mode=mode)

    def write_with(
        self,
        path: Path | str,
        writer: Callable[[IO[Any]], object],
        *,
        binary: bool = True,
        mode: int | None = None,
    ) -> Path:
        """``writer`` fills an open new file, which then replaces ``path`` (see ``write_bytes``)."""
        target = self.path(path)
        self.mkdir(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb" if binary else "w") as handle:
                writer(handle)
            os.chmod(tmp, (0o666 if mode is None else mode) & ~_UMASK)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return Path(path)

    def write_file(
        self, path: Path | str, producer: Callable[[Path], object], mode: int | None = None
    ) -> Path:
        """A file another library writes by name (``onnx.save``, an export): ``producer`` writes
        a fresh temporary path beside ``path``, which then replaces it."""
        target = self.path(path)
        self.mkdir(target.parent)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            produced = scratch / target.name
            producer(produced)
            if not produced.is_file() or produced.is_symlink():
                raise GatewayError(f"{target}: nothing was written")
            os.chmod(produced, (0o666 if mode is None else mode) & ~_UMASK)
            os.replace(produced, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return Path(path)

    @contextlib.contextmanager
    def open_new(self, path: Path | str) -> Iterator[IO[bytes]]:
        """An open binary file that becomes ``path`` when the block ends (a child process's
        output); on an error the new file is kept under ``path`` too, for what it holds."""
        target = self.path(path)
        self.mkdir(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.chmod(tmp, 0o666 & ~_UMASK)
        handle = os.fdopen(fd, "wb")
        try:
            yield handle
        finally:
            handle.close()
            os.replace(tmp, target)

    def open_append(self, path: Path | str) -> IO[bytes]:
        """``path`` opened to append (a log a resumed run continues): never through a link, and
        refused when another name shares the file (a hard link)."""
        target = self.path(path)
        self.mkdir(target.parent)
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            os.close(fd)
            raise GatewayError(
                f"{target} is shared with another name (a hard link) or not a plain file; "
                "move it away and run the same command again"
            )
        return os.fdopen(fd, "ab")

    @contextlib.contextmanager
    def lock(self, path: Path | str) -> Iterator[None]:
        """Hold an exclusive lock on the file ``path`` (created empty, never through a link) for
        the block: processes that share the folder (the cache) take turns."""
        target = self.path(path)
        self.mkdir(target.parent)
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def copy_in(self, source: Path | str, path: Path | str) -> Path:
        """Copy the file ``source`` to ``path`` as a new file, with the source's permission bits."""

        def copy(handle: IO[Any]) -> None:
            with open(source, "rb") as src:
                shutil.copyfileobj(src, handle, 1 << 20)

        return self.write_with(path, copy, mode=os.stat(source).st_mode & 0o777)

    def link_in(self, source: Path | str, path: Path | str) -> Path:
        """Place the file ``source`` at ``path`` for reading only (weights tritonlab never changes):
        a hard link where possible, else a copy; an equal file there is kept."""
        target = self.path(path)
        self.mkdir(target.parent)
        if target.is_file() and _same_content(Path(source), target):
            return Path(path)
        scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        try:
            try:
                os.link(source, scratch / "f")
            except OSError:
                shutil.copyfile(source, scratch / "f")
            os.replace(scratch / "f", target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        return Path(path)

    def copy_tree_in(
        self,
        source: Path | str,
        path: Path | str,
        *,
        link: Callable[[Path], bool] = lambda _: False,
        skip: Callable[[Path], bool] = lambda _: False,
    ) -> Path:
        """Copy the folder ``source`` (links in it followed for reading) to ``path``, replacing an
        earlier copy: ``link``'s files hard-linked, the rest copied, ``skip``'s left out."""
        target = self.path(path)
        if overlaps(source, target):
            raise GatewayError(
                f"{target} would overlap {source}, the folder it is copied from; nothing was "
                "changed: choose an --out folder apart from the inputs"
            )
        if os.path.lexists(target):
            self.remove_tree(target)
        source = Path(source)
        for folder, dirs, files in os.walk(source, followlinks=True):
            dirs[:] = [d for d in dirs if not skip(Path(folder) / d)]
            rel = Path(folder).relative_to(source)
            here = os.stat(folder)
            above = [source.joinpath(*rel.parts[:i]) for i in range(len(rel.parts))]
            if any(os.path.samestat(here, os.stat(a)) for a in above):  # never loop
                raise GatewayError(
                    f"{folder} links back to a folder above it; tritonlab copies model folders "
                    "and will not follow a loop: remove the link"
                )
            self.mkdir(target / rel)
            for name in files:
                src = Path(folder) / name
                if skip(src):
                    continue
                if link(src):
                    self.link_in(src, target / rel / name)
                else:
                    self.copy_in(src, target / rel / name)
        self.mkdir(target)
        return Path(path)

    def make_link(self, target: Path | str, path: Path | str) -> Path:
        """A symbolic link at ``path`` (inside the root, new) pointing at ``target`` (a folder
        served under a plain name: the link is only ever read through)."""
        link = self.path(path)
        self.mkdir(link.parent)
        os.symlink(target, link, target_is_directory=os.path.isdir(target))
        return Path(path)

    # moves and deletes

    def move(self, source: Path | str, path: Path | str) -> Path:
        """Rename ``source`` to ``path``, both inside the root."""
        src, target = self.path(source), self.path(path)
        self.mkdir(target.parent)
        os.replace(src, target)
        return Path(path)

    def remove(self, path: Path | str, *, missing_ok: bool = True) -> None:
        """Delete the file (or link) ``path``; a folder is refused (``remove_tree``)."""
        if os.path.islink(path):  # the link itself (its parent checked), never its target
            absolute = absolute_path(path)
            target = self.path(absolute.parent) / absolute.name
        else:
            target = self.path(path)
        try:
            os.unlink(target)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self, path: Path | str) -> None:
        """Delete the folder ``path`` (never the root); links inside are removed, never followed."""
        target = self.path(path)
        if target == self.root:
            raise GatewayError(f"{target}: a gateway never deletes its own root")
        if not os.path.lexists(target):
            return
        shutil.rmtree(target)


def _same_content(a: Path, b: Path) -> bool:
    try:
        if os.path.samefile(a, b):
            return True
        if a.stat().st_size != b.stat().st_size:
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                x, y = fa.read(1 << 20), fb.read(1 << 20)
                if x != y:
                    return False
                if not x:
                    return True
    except OSError:
        return False
