//! A peer that stalls, shared by the integration and CLI suites.

/// A loopback server that answers every request with headers and ten bytes of a
/// million-byte body, then stalls; the held connections are kept open. Returns its port.
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
