"""A connection's send buffer, widened on a Unix socket.

A write sends its statements in a pipeline and goes on with its Python work while
the server runs them; it waits only where it reads a result. A statement larger than
the socket's send buffer is the exception: the fact versions of a 1,000-fact
``add_facts`` call carry a megabyte of vectors, and the default buffer of a Unix
socket on Linux (208 kB) holds a fifth of it, so the client stops at the send until
the server has run every statement queued before it and begun to read this one.
Widened to 4 MB (as far as the system allows: ``net.core.wmem_max``, 4 MB here), the
statement is handed over whole: a bulk load of 30,000 facts spent 3.9 to 4.0 s waiting
on the server instead of 4.5 to 4.7, and wrote 3,057 to 3,157 facts/s against 2,936 to
2,998 (two rounds each, in turn).

TCP connections are left alone: Linux grows their buffers as a connection needs
(``net.ipv4.tcp_wmem``), and setting one fixes its size and ends that.
"""

from __future__ import annotations

import os
import socket

__all__ = ["SEND_BUFFER", "widen_send_buffer"]

SEND_BUFFER = 4 * 1024 * 1024  # bytes asked for; the system may give less


def widen_send_buffer(fd: int) -> None:
    """Ask for a ``SEND_BUFFER`` send buffer on ``fd`` if it is a Unix-domain stream
    socket whose buffer is smaller; anything else, or a system that refuses, is left
    as it is."""
    family = getattr(socket, "AF_UNIX", None)
    if family is None or fd < 0:
        return
    try:
        # a second descriptor of the same socket: its options are the socket's, and
        # closing it leaves the connection's own descriptor open
        with socket.socket(fileno=os.dup(fd)) as sock:
            if sock.family != family or sock.type != socket.SOCK_STREAM:
                return
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) < SEND_BUFFER:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    except OSError:
        return
