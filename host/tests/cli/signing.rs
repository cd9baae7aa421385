//! `hookhost keygen`, `hookhost plugin sign` and `hookhost plugin verify`.

use std::os::unix::fs::PermissionsExt;

use crate::support::TestEnv;

#[test]
fn keygen_sign_and_verify_round_trip_and_catch_tampering() {
    let env = TestEnv::new();
    let key = env.home.join("signing.key");
    let run = env.run(&["keygen", "--out", key.to_str().unwrap()], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let public = run.stdout.trim().to_string();
    assert_eq!(public.len(), 64, "hex public key: {public}");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let pub_file = env.home.join("signing.key.pub");
    assert_eq!(std::fs::read_to_string(&pub_file).unwrap().trim(), public);
    // Never overwrites a key by accident.
    let again = env.run(&["keygen", "--out", key.to_str().unwrap()], "");
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);

    let plugin = env.write("gate.wasm", "pretend component bytes");
    let plugin_arg = plugin.to_str().unwrap();
    let run = env.run(
        &["plugin", "sign", "--key", key.to_str().unwrap(), plugin_arg],
        "",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let sig = env.project.join("gate.wasm.sig");
    assert_eq!(std::fs::read_to_string(&sig).unwrap().trim().len(), 128);

    let verify = |key: &str| env.run(&["plugin", "verify", "--key", key, plugin_arg], "");
    let ok = verify(&public);
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    assert_eq!(verify(pub_file.to_str().unwrap()).code, 0);

    // Another key's public key does not verify it.
    let other = env.home.join("other.key");
    let other_public = env
        .run(&["keygen", "--out", other.to_str().unwrap()], "")
        .stdout;
    let bad = verify(other_public.trim());
    assert_eq!(bad.code, 1);
    assert!(bad.stdout.contains("does not verify"), "{}", bad.stdout);
    // Changed bytes do not verify.
    env.write("gate.wasm", "pretend component bytes, altered");
    let bad = verify(&public);
    assert_eq!(bad.code, 1);
    assert!(bad.stdout.contains("does not verify"), "{}", bad.stdout);
}
