//! A peer that stalls, shared by the integration and CLI suites.

/// A loopback server that answers every request with headers and ten bytes of a
/// million-byte body, then stalls; the held connections are kept open. Returns its port.
#[allow(dead_code)]
pub fn stalling_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ =
                stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n0123456789");
            held.push(stream);
        }
    });
    port
}

/// A loopback server that answers every request with a body that never ends, written as
/// fast as the peer reads: chunked (1 MiB chunks) or under a `Content-Length` it never
/// reaches. Each connection is served on its own thread until the peer goes. Returns
/// its port.
#[allow(dead_code)]
pub fn endless_server(chunked: bool) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let head: &[u8] = if chunked {
                    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                } else {
                    b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n"
                };
                let data = vec![b'e'; 1 << 20];
                let mut frame = Vec::new();
                if chunked {
                    frame.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                }
                frame.extend_from_slice(&data);
                if chunked {
                    frame.extend_from_slice(b"\r\n");
                }
                if stream.write_all(head).is_err() {
                    return;
                }
                while stream.write_all(&frame).is_ok() {}
            });
        }
    });
    port
}
