//! Unit tests of the guest's filesystem chokepoint.

use super::*;

/// Every method of `descriptor` in the WIT the linker defines is classified, and
/// nothing else is: a method added to WASI fails here until it is.
#[test]
fn every_descriptor_method_of_the_wit_is_classified() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut resolve = wit_parser::Resolve::default();
    resolve
        .push_dir(manifest.join("../wit"))
        .expect("hookhost's WIT parses");
    resolve
        .push_dir(manifest.join("tests/fixtures/kitchen-sink"))
        .expect("the kitchen-sink WIT parses");
    let mut in_wit: Vec<String> = resolve
        .interfaces
        .iter()
        .filter(|(_, i)| i.name.as_deref() == Some("types"))
        .filter(|(_, i)| {
            i.package.is_some_and(|p| {
                resolve.packages[p]
                    .name
                    .to_string()
                    .starts_with("wasi:filesystem")
            })
        })
        .flat_map(|(_, i)| i.functions.keys())
        .filter_map(|name| name.strip_prefix("[method]descriptor."))
        .map(str::to_owned)
        .collect();
    in_wit.sort();
    let mut ours: Vec<String> = DESCRIPTOR_METHODS
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    ours.sort();
    assert!(in_wit.len() >= 27, "{in_wit:?}");
    assert_eq!(ours, in_wit);
}

#[test]
fn targets_resolve_beneath_their_directory_as_the_sandbox_does() {
    let root = tempfile::tempdir().unwrap();
    let top = root.path().join("top");
    std::fs::create_dir_all(top.join("src/.git")).unwrap();
    std::os::unix::fs::symlink(".git", top.join("src/x")).unwrap();
    std::os::unix::fs::symlink("x/config", top.join("src/y")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", top.join("abs")).unwrap();
    let dir = File::open(&top).unwrap();
    let real = std::fs::canonicalize(&top).unwrap();
    let at = |p: &str, follow| target(&dir, p, follow).map(|t| t.real());
    assert_eq!(
        at("src/x/config", false).unwrap(),
        real.join("src/.git/config")
    );
    assert_eq!(at("src/y", false).unwrap(), real.join("src/y"));
    assert_eq!(at("src/y", true).unwrap(), real.join("src/.git/config"));
    assert_eq!(at("src/.git/..", false).unwrap(), real.join("src"));
    assert_eq!(at(".", false).unwrap(), real);
    for escape in ["../top/src", "/etc/passwd", "src/../../x"] {
        let e = at(escape, false).unwrap_err();
        assert_eq!(resolve_error(e), ErrorCode::NotPermitted, "{escape}");
    }
    assert_eq!(
        resolve_error(at("abs", true).unwrap_err()),
        ErrorCode::NotPermitted
    );
    // Owned by name after resolution, not by the names the guest wrote.
    assert!(owned_by_name(&at("src/x/config", false).unwrap()).is_some());
}
