//! The answer on the wire: exit code, the lengths of stdout and stderr, then both.

use super::super::dispatch::Printed;

/// The wire form of `printed` (read back by [`decode`]).
pub(super) fn encode(printed: &Printed) -> Vec<u8> {
    let (stdout, stderr) = (printed.stdout.as_bytes(), printed.stderr.as_bytes());
    let mut bytes = Vec::with_capacity(9 + stdout.len() + stderr.len());
    bytes.push(printed.code);
    bytes.extend_from_slice(&(stdout.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&(stderr.len() as u32).to_le_bytes());
    bytes.extend_from_slice(stdout);
    bytes.extend_from_slice(stderr);
    bytes
}

/// The answer in `bytes`, if they are exactly one whole answer.
/// ([`super::key::split_answer`], which the small client reads it with too).
pub(super) fn decode(bytes: &[u8]) -> Option<Printed> {
    let (code, stdout, stderr) = super::key::split_answer(bytes)?;
    Some(Printed {
        stdout: String::from_utf8_lossy(stdout).into_owned(),
        stderr: String::from_utf8_lossy(stderr).into_owned(),
        code,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_survive_the_wire() {
        let printed = Printed {
            stdout: "{\"decision\":\"deny\"}\n".into(),
            stderr: "blocked: rm -rf\n".into(),
            code: 2,
        };
        let decoded = decode(&encode(&printed)).expect("a whole answer");
        assert_eq!(
            (decoded.stdout, decoded.stderr, decoded.code),
            (printed.stdout, printed.stderr, printed.code)
        );
        let empty = decode(&encode(&Printed::error("x"))).expect("a whole answer");
        assert_eq!((empty.stdout.as_str(), empty.code), ("", 1));
    }

    #[test]
    fn a_cut_answer_is_not_an_answer() {
        let bytes = encode(&Printed {
            stdout: "0123456789".into(),
            stderr: "warning".into(),
            code: 0,
        });
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_none(), "cut at {cut} decoded");
        }
    }
}
