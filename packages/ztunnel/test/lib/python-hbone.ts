/**
 * An independent HBONE client for interop tests: python3-h2 over TLS 1.3 with a client
 * certificate, ALPN h2 and no SNI; sends CONNECT <authority>, prints the status, then (on 200)
 * sends `payload` bytes, half-closes and prints how many bytes came back and whether they start
 * with the server's greeting.
 */
export const PYTHON_HBONE_CLIENT = `
import socket, ssl, sys
import h2.connection, h2.config, h2.events
host, port, authority, cert, key, ca, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.check_hostname = False
ctx.load_verify_locations(ca)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
tls = ctx.wrap_socket(socket.create_connection((host, port), 5))
assert tls.selected_alpn_protocol() == "h2", tls.selected_alpn_protocol()
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, validate_outbound_headers=False, validate_inbound_headers=False))
conn.initiate_connection()
sid = conn.get_next_available_stream_id()
conn.send_headers(sid, [(b":method", b"CONNECT"), (b":authority", authority.encode())])
tls.sendall(conn.data_to_send())
status, got, done, sent = None, b"", False, False
data = bytes((i * 7) % 251 for i in range(n))
tls.settimeout(10)
while not done:
    chunk = tls.recv(65536)
    if not chunk: break
    for ev in conn.receive_data(chunk):
        if isinstance(ev, h2.events.ResponseReceived):
            status = dict(ev.headers)[b":status"].decode()
            if status != "200": done = True
        elif isinstance(ev, h2.events.DataReceived):
            got += ev.data
            conn.acknowledge_received_data(len(ev.data), sid)
        elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
            done = True
    if status == "200" and not sent:
        off = 0
        while off < len(data):
            size = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(data) - off)
            if size <= 0:
                tls.sendall(conn.data_to_send())
                for ev in conn.receive_data(tls.recv(65536)):
                    if isinstance(ev, h2.events.DataReceived):
                        got += ev.data
                        conn.acknowledge_received_data(len(ev.data), sid)
                continue
            conn.send_data(sid, data[off:off + size]); off += size
        conn.end_stream(sid); sent = True
    tls.sendall(conn.data_to_send())
head, _, rest = got.partition(b"\\n")
print(status, head.decode(), len(rest), rest == data, flush=True)
`;
