# Free loopback ports for the servers a script starts. Picked below Linux's ephemeral range
# (32768-60999): a port found by binding port 0 comes from that range, and can be handed to
# another process's outgoing connection before the script's server binds it (seen once in CI:
# Alertmanager's "address already in use"). `free_ports N` holds all N until all are found, so
# no two of one call are the same.
free_ports() {
  python3 -c '
import random, socket, sys
held, ports = [], []
while len(ports) < int(sys.argv[1]):
    port = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        continue
    held.append(s)
    ports.append(port)
print(*ports)
' "$1"
}
free_port() { free_ports 1; }
