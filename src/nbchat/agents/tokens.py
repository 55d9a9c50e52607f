"""Tokens for outside agents: minted by the person, shown once, kept only as hashes.

A token names one agent (``label``), what it may touch (notebook paths or
folders, relative to the Jupyter server's root) and which tool classes it may
call (``read``, ``edit``, ``execute``), until it expires or is revoked. The
secret is ``nbchat_agent_<id>_<random>``: the id finds the record, the whole
secret's SHA-256 is compared in constant time, and the secret itself is never
written anywhere: its shape, :data:`nbchat.base._secrets.AGENT_TOKEN`, is
scrubbed from everything nbchat hands an agent or a model. Tokens live in one
private file per user beside the thread store
(``<jupyter data dir>/nbchat-agents/<user>.json``), replaced atomically under
a lock, so two kernels minting at once lose nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from filelock import FileLock, Timeout

from ..base._secrets import AGENT_TOKEN, AGENT_TOKEN_PREFIX
from ..base.config import ENV_AGENT_TOKENS, jupyter_data_dir
from ..base.errors import AgentRefused, InputError, StoreCorrupt, StoreLocked
from ..base.policy import effective_approval
from ..store._files import user_dirname
from ..store._storage import atomic_write

CLASSES = ("read", "edit", "execute")
APPROVES = ("read-only", "always")  # when a token's calls ask: changes only, or reads too
PREFIX = AGENT_TOKEN_PREFIX
DEFAULT_DAYS = 30
MAX_DAYS = 365
_LABEL = re.compile(r"\A[\w .@:/+-]{1,60}\Z")


@dataclass(frozen=True)
class AgentToken:
    """One agent's token as stored: never the secret, only its hash."""

    id: str
    label: str
    paths: tuple[str, ...]
    classes: tuple[str, ...]
    created: float
    expires: float
    digest: str = field(repr=False)
    revoked: float | None = None
    approve: str = "read-only"  # "read-only": reads run at once; "always": reads ask too

    @property
    def reads_ask(self) -> bool:
        """Whether this token's reads wait for the person: its policy, under the cap.

        Changes always ask. ``NBCHAT_MAX_APPROVAL=always`` makes reads ask too,
        as it does for the reads of nbchat's own model's MCP tools.
        """
        policy = {"read-only": "risky"}.get(self.approve, "always")
        return effective_approval(policy) == "always"

    @property
    def is_live(self) -> bool:
        return self.revoked is None and time.time() < self.expires

    def state(self) -> str:
        """``live``, ``revoked`` or ``expired``."""
        if self.revoked is not None:
            return "revoked"
        return "live" if time.time() < self.expires else "expired"

    def may_touch(self, path: str) -> bool:
        """Whether the notebook at ``path`` (server-relative) is inside this token's scope."""
        target = _normal(path)
        for allowed in self.paths:
            if allowed in ("", ".") or target == allowed or target.startswith(allowed + "/"):
                return True
        return False

    def check(self, path: str | None, kind: str) -> None:
        """AgentRefused (403) unless this token may use a ``kind`` tool on ``path``."""
        if kind not in self.classes:
            raise AgentRefused(
                f"token {self.label!r} may not use {kind} tools (it may: "
                f"{', '.join(self.classes)}); mint a token with --agent-tools {kind}", status=403,
            )  # fmt: skip
        if path is not None and not self.may_touch(path):
            raise self.out_of_scope(path)

    def out_of_scope(self, path: str) -> AgentRefused:
        """The refusal for ``path`` outside this token's scope (by its name or by its file)."""
        return AgentRefused(
            f"token {self.label!r} may not touch {path!r} (its scope: "
            f"{', '.join(self.paths) or 'nothing'}); mint one whose scope holds it",
            status=403,
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["paths"], data["classes"] = list(self.paths), list(self.classes)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> AgentToken:
        if not isinstance(data, dict):
            raise ValueError("a token record that is not an object")
        return cls(
            id=str(data["id"]), label=str(data["label"]),
            paths=tuple(str(p) for p in data["paths"]),
            classes=tuple(c for c in data["classes"] if c in CLASSES),
            created=float(data["created"]), expires=float(data["expires"]),
            digest=str(data["digest"]),
            revoked=None if data.get("revoked") is None else float(data["revoked"]),
            approve="always" if data.get("approve") == "always" else "read-only",
        )  # fmt: skip


@dataclass(frozen=True)
class Minted:
    """A token just made: its record, and the secret shown this once."""

    token: AgentToken
    secret: str = field(repr=False)


def _normal(path: str) -> str:
    parts = [p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("/", ".")]
    if ".." in parts:
        raise AgentRefused(f"the path {path!r} leaves the server's root; name a notebook in it",
                           status=403)  # fmt: skip
    return "/".join(parts)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def default_folder() -> Path:
    """Where token files are kept: ``NBCHAT_AGENT_TOKENS``, else in the Jupyter data dir."""
    configured = os.environ.get(ENV_AGENT_TOKENS, "").strip()
    return Path(configured).expanduser() if configured else jupyter_data_dir() / "nbchat-agents"


class TokenStore:
    """The user's agent tokens, in one private JSON file replaced atomically under a lock."""

    def __init__(self, user: str, folder: str | os.PathLike[str] | None = None) -> None:
        self.user = user
        self.folder = Path(folder) if folder is not None else default_folder()
        self.path = self.folder / f"{user_dirname(user)}.json"
        self._lock = FileLock(str(self.path) + ".lock", timeout=10)

    def __repr__(self) -> str:
        return f"TokenStore(user={self.user!r}, path={str(self.path)!r})"

    # -- reading ----------------------------------------------------------------
    def tokens(self) -> list[AgentToken]:
        """Every token, newest first, with its state."""
        return sorted(self._read(), key=lambda t: t.created, reverse=True)

    def verify(self, secret: str | None) -> AgentToken:
        """The live token ``secret`` is; AgentRefused (401) naming why not."""
        match = AGENT_TOKEN.fullmatch(secret or "")
        if match is None:
            raise AgentRefused(
                "no nbchat agent token: send 'Authorization: Bearer nbchat_agent_…'; mint one "
                "with %chat --agent-token LABEL or python -m nbchat agents mint LABEL", status=401,
            )  # fmt: skip
        wanted = _digest(secret or "")
        found = None
        for token in self._read():  # every record compared, in constant time each
            if hmac.compare_digest(token.digest, wanted) and token.id == match.group(1):
                found = token
        if found is None:
            raise AgentRefused("this agent token is not known here; mint a new one", status=401)
        if not found.is_live:
            raise AgentRefused(
                f"the agent token {found.label!r} is {found.state()}; mint a new one", status=401
            )
        return found

    # -- writing ----------------------------------------------------------------
    def mint(
        self,
        label: str,
        *,
        paths: Sequence[str] = ("",),
        classes: Iterable[str] = CLASSES,
        days: float = DEFAULT_DAYS,
        approve: str = "read-only",
    ) -> Minted:
        """A new token for the agent ``label``; its secret is in the result only."""
        if not isinstance(label, str) or not _LABEL.match(label.strip()):
            raise InputError(
                f"an agent's label is 1–60 letters, digits, spaces or . @ : / + -, got {label!r}"
            )
        chosen = tuple(dict.fromkeys(c.strip() for c in classes if c.strip()))
        unknown = [c for c in chosen if c not in CLASSES]
        if unknown or not chosen:
            raise InputError(
                f"tool classes are some of {', '.join(CLASSES)}; got {unknown or 'none'}"
            )
        if approve not in APPROVES:
            raise InputError(f"a token's reads are {' or '.join(APPROVES)}, got {approve!r}")
        if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days <= MAX_DAYS:
            raise InputError(f"a token lasts from a moment to {MAX_DAYS} days; got {days!r}")
        scope = tuple(dict.fromkeys(_normal(p) for p in paths)) or ("",)
        ident = secrets.token_hex(4)
        secret = f"{PREFIX}{ident}_{secrets.token_urlsafe(32)}"
        now = time.time()
        token = AgentToken(ident, label.strip(), scope, chosen, now, now + days * 86400,
                           _digest(secret), approve=approve)  # fmt: skip
        with self._locked():
            self._write([*self._read(), token])
        return Minted(token, secret)

    def revoke(self, ident: str) -> AgentToken:
        """Revoke the token with id (or label) ``ident``; the record as saved."""
        with self._locked():
            tokens = self._read()
            hits = [t for t in tokens if ident in (t.id, t.label) and t.revoked is None]
            if len(hits) != 1:
                live = ", ".join(f"{t.id} ({t.label})" for t in tokens if t.revoked is None)
                raise InputError(
                    f"{'several' if hits else 'no'} live agent tokens are named {ident!r}; "
                    f"name one by id: {live or 'none'}"
                )
            done = replace(hits[0], revoked=time.time())
            self._write([done if t.id == done.id else t for t in tokens])
        return done

    # -- the file -----------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            with self._lock:
                yield
        except Timeout as exc:
            raise StoreLocked(f"{self.path} stayed locked for 10 s; try again") from exc

    def _read(self) -> list[AgentToken]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreCorrupt(
                f"cannot read {self.path}: {exc.strerror}", path=str(self.path)
            ) from None
        try:
            data = json.loads(raw)
            return [AgentToken.from_dict(item) for item in data["tokens"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise StoreCorrupt(
                f"{self.path} is not an nbchat token file ({exc}); it was left as it is: "
                "move it away to start again", path=str(self.path),
            ) from None  # fmt: skip

    def _write(self, tokens: list[AgentToken]) -> None:
        body = json.dumps({"tokens": [t.to_dict() for t in tokens]}, indent=1).encode()
        atomic_write(self.path, body)  # a private temp file (0600) moved into place
