//! A plugin built for a future `hookhost:hook@0.3.0`: the host must refuse it with a
//! message naming both versions.

wit_bindgen::generate!({
    inline: r#"
        package hookhost:hook@0.3.0;

        interface hook {
            record event { name: string, input-json: string }
            describe: func() -> string;
            handle: func(event: event) -> result<string, string>;
        }

        world plugin {
            export hook;
        }
    "#,
    world: "plugin",
});

struct Future;

impl exports::hookhost::hook::hook::Guest for Future {
    fn describe() -> String {
        "from the future".into()
    }

    fn handle(event: exports::hookhost::hook::hook::Event) -> Result<String, String> {
        Ok(event.name)
    }
}

export!(Future);
