"""The one error type of the certificate tool: bad input, refused with a one-line message."""


class CertError(Exception):
    """A certificate set that cannot be read, trusted or safely replaced.

    The message is a single line meant for the operator; the CLI prints it and exits
    non-zero. Raised before anything is written, so nothing on disk or in the cluster
    changes when it is raised.
    """
