"""Errors a user can act on. The command line prints their message on one line and exits with code 2."""


class ContrastextError(Exception):
    """Base class of every error caused by the user's input (data, configuration, arguments)."""


class MissingDataError(ContrastextError, FileNotFoundError):
    """A data file or folder is not where the task registry expects it."""


class DataFormatError(ContrastextError, ValueError):
    """A row of a data file cannot be read; the message names the file and the line."""

    def __init__(self, path, line: int | None, reason: str):
        self.path = str(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")

    def __reduce__(self):  # picklable with its three arguments (multiprocessing, hypothesis)
        return (type(self), (self.path, self.line, self.reason))


class CorruptFileError(DataFormatError):
    """A file (model weights, checkpoint part, log) is empty, truncated or not in its format; names the file."""


class EmptyDataError(ContrastextError, ValueError):
    """A file, subset or split holds no usable row (an empty file, a header only, every row skipped)."""


class NonFiniteError(ContrastextError, ValueError):
    """A model produced NaN or infinite values (diverged weights); nothing is written from them."""


class UnsafeLoadError(ContrastextError):
    """Loading would run code from the input (a pickle holding objects, a model's own Python code): refused."""


class ConfigError(ContrastextError, ValueError):
    """A configuration key is unknown or has a value of the wrong type; the message names key and file."""


class UnknownNameError(ContrastextError, KeyError):
    """A name (task, pooling, loss, recipe...) is not one of the known ones; the message lists them."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ModelFolderError(ConfigError):
    """A model folder whose files disagree with each other or cannot be used as they are (a config.json that does
    not fit the weights, missing or integer tensors, a pooling config of another width, a tokenizer that cannot
    tokenize); the message names the folder and the file or key."""


class NotRegularFileError(ContrastextError, ValueError):
    """A path given as an input file is a FIFO (named pipe), a device, a socket or a folder: named as what it is
    (reading it could block forever or never end), never reported as missing."""
