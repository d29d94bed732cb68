"""A free loopback TCP port for a test's server that may be restarted on it (Redis after a kill, the API server).

Picked below the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range): an outgoing connection's local
port always comes from that range, so while the server is down no client (a worker reconnecting to Redis, the test's
own polling) can take the port, and none can connect to itself on it (TCP's simultaneous open: a connect to a port
nobody listens on that draws that very port as its own local port succeeds, to itself).  A port bound with port 0
lies inside the range and has both hazards (the flakiness audit, twenty-fifth and twenty-sixth sessions).

    python3 tests/integration/serve/ports.py      prints one such port
"""
import random
import socket

LOWEST = 10000  # below: ports that well-known services listen on


def ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port():
    """A port in [LOWEST, the ephemeral range's first) that binds now; where that span is too small to try, one the
    kernel gives (inside the range: the old way)."""
    high = ephemeral_low()
    if high - LOWEST >= 1000:
        for port in random.sample(range(LOWEST, high), 200):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
            finally:
                s.close()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


if __name__ == "__main__":
    print(free_port())
