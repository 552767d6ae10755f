"""What marks a checkpoint as written by ``headgeom train``: its ``format`` tag and the versions
readers accept. The one home of both, imported by the writer (:mod:`headgeom.train.checkpoint`)
and the readers (:mod:`headgeom.runs.trained`, :mod:`headgeom.checkpoints.own_runs`)."""

CHECKPOINT_FORMAT = "headgeom.train.checkpoint"
CHECKPOINT_VERSION = 1  # what train writes
CHECKPOINT_VERSIONS = (CHECKPOINT_VERSION,)  # what the readers accept
