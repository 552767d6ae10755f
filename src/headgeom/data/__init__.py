"""Image datasets as uint8 tensors: CIFAR-10/100, ImageFolder, and the procedural ``shapes``.

Data flows one way (data → augment → backbone → head → ...); loaders never normalise.
"""

from .cifar import (SafeUnpickler, UnsafePickleError, find_cifar, load_cifar, load_cifar10,
                    load_cifar100, read_cifar_binary, read_cifar_pickle, safe_pickle_load)
from .dataset import ImageDataset
from .download import CIFAR_ARCHIVES, download_cifar, resolve_data_dir
from .imagefolder import load_imagefolder
from .registry import DATASET_STATS, DATASETS, ChannelStats, dataset_stats, load_dataset
from .shapes import SHAPE_CLASSES, load_shapes, make_shapes

__all__ = [
    "CIFAR_ARCHIVES", "DATASETS", "DATASET_STATS", "SHAPE_CLASSES", "ChannelStats",
    "ImageDataset", "SafeUnpickler", "UnsafePickleError", "dataset_stats", "download_cifar",
    "find_cifar", "load_cifar", "load_cifar10", "load_cifar100", "load_dataset",
    "load_imagefolder", "load_shapes", "make_shapes", "read_cifar_binary",
    "read_cifar_pickle", "resolve_data_dir", "safe_pickle_load",
]
