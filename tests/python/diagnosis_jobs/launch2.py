"""Starts a script as the two ranks of a torch.distributed job on this host, with
the variables torchrun sets (torchrun does not run with Debian's torch 1.13 on
Python 3.11): `python launch2.py SCRIPT ARGS...`. Exits with the worst status.
"""

import os
import socket
import subprocess
import sys

WORLD = 2


def main():
    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(WORLD))
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    ranks = [subprocess.Popen([sys.executable] + sys.argv[1:],
                              env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(WORLD)]
    sys.exit(max(abs(rank.wait()) for rank in ranks))


if __name__ == "__main__":
    main()
