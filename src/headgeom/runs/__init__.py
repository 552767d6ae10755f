"""Run folders: who may write one (:mod:`.lock`) and how a command starts in one (:mod:`.folder`)."""
from .lock import LOCK_NAME, Holder, RunLock, RunLockedError

__all__ = ["LOCK_NAME", "Holder", "RunLock", "RunLockedError"]
