//! A client speaking raw bytes to a gateway, for edge tests that need to see
//! when the gateway answers and when it closes.

use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Reads until the peer closes (EOF or reset) or `limit` passes; what was read
/// and whether it closed.
pub async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    let mut seen = Vec::new();
    let mut buffer = [0_u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return (String::from_utf8_lossy(&seen).into_owned(), false),
            Ok(Ok(0) | Err(_)) => return (String::from_utf8_lossy(&seen).into_owned(), true),
            Ok(Ok(n)) => seen.extend_from_slice(&buffer[..n]),
        }
    }
}
