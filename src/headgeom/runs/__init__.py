"""Run folders: who may write one (:mod:`.lock`), how a command starts in one (:mod:`.folder`), and
how a checkpoint file is read without running pickled code (:mod:`.safe_load`)."""
from .lock import LOCK_NAME, Holder, RunLock, RunLockedError

__all__ = ["LOCK_NAME", "Holder", "RunLock", "RunLockedError"]
