//! The generating test of the host-call meter ([`super::hostcalls::meter`]): a
//! kitchen-sink component, assembled here from the WIT of everything the sandbox's
//! linker provides (`host/tests/fixtures/kitchen-sink`), imports every function and
//! resource destructor of it and has one wrapper per import that calls it with zeroed
//! arguments. Each wrapper is called once in a fresh store of the sandbox
//! ([`Sandbox::store`]) and must cost at least [`FUEL_PER_HOST_CALL`] more than a call
//! of no import, whether the host answers or traps on the zeroed arguments (the meter
//! runs before the arguments are read). Every import that answers without a resource
//! is then called for ever and must end on the default fuel.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasm_encoder::{
    CodeSection, ConstExpr, ElementSection, Elements, EntityType, ExportKind, ExportSection,
    Function, FunctionSection, GlobalSection, GlobalType, ImportSection, Instruction,
    MemorySection, MemoryType, Module, RefType, TableSection, TableType, TypeSection, ValType,
};
use wasmtime::component::{Component, InstancePre};
use wasmtime::{Store, Trap};
use wit_parser::abi::{AbiVariant, WasmType};
use wit_parser::{Handle, Resolve, Type, TypeDefKind, WorldItem};

use super::hostcalls::FUEL_PER_HOST_CALL;
use super::limits::Limits;
use super::state::State;
use super::{DEFAULT_FUEL, DEFAULT_MAX_PLUGIN_BYTES, Sandbox};
use crate::policy::capability::Live;

/// One imported function of the kitchen sink, as the core module calls it.
struct Import {
    /// Interface (`wasi:random/random@0.2.12`).
    module: String,
    /// Function (`get-random-u64`, `[method]descriptor.stat`, `[resource-drop]pollable`).
    name: String,
    params: Vec<ValType>,
    results: Vec<ValType>,
    /// Whether it takes its last argument as a pointer to its results.
    retptr: bool,
    /// Whether what it returns holds a resource (a flood would fill the table).
    returns_resource: bool,
}

fn core_type(ty: &WasmType) -> ValType {
    match ty {
        WasmType::I32 | WasmType::Pointer | WasmType::Length => ValType::I32,
        WasmType::I64 | WasmType::PointerOrI64 => ValType::I64,
        WasmType::F32 => ValType::F32,
        WasmType::F64 => ValType::F64,
    }
}

/// Whether a value of `ty` holds an owned resource.
fn holds_resource(resolve: &Resolve, ty: &Type) -> bool {
    let Type::Id(id) = ty else { return false };
    let any = |types: Vec<&Type>| types.into_iter().any(|t| holds_resource(resolve, t));
    match &resolve.types[*id].kind {
        TypeDefKind::Handle(Handle::Own(_)) | TypeDefKind::Resource => true,
        TypeDefKind::Handle(Handle::Borrow(_)) => false,
        TypeDefKind::Type(t) | TypeDefKind::List(t) | TypeDefKind::Option(t) => {
            holds_resource(resolve, t)
        }
        TypeDefKind::Tuple(t) => any(t.types.iter().collect()),
        TypeDefKind::Record(r) => any(r.fields.iter().map(|f| &f.ty).collect()),
        TypeDefKind::Variant(v) => any(v.cases.iter().filter_map(|c| c.ty.as_ref()).collect()),
        TypeDefKind::Result(r) => any(r.ok.iter().chain(r.err.iter()).collect()),
        _ => false,
    }
}

/// The WIT of the kitchen sink: hookhost's packages (every version the host loads),
/// then the fixture's world and its WASI dependencies.
fn kitchen_sink_wit() -> (Resolve, wit_parser::WorldId) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut resolve = Resolve::default();
    for dir in ["wit/v0.1.0", "wit"] {
        resolve
            .push_dir(manifest.join(dir))
            .expect("hookhost's WIT parses");
    }
    let (package, _) = resolve
        .push_dir(manifest.join("tests/fixtures/kitchen-sink"))
        .expect("the kitchen-sink WIT parses");
    let world = resolve
        .select_world(&[package], Some("kitchen-sink"))
        .expect("the kitchen-sink world");
    (resolve, world)
}

/// Every function and resource destructor the kitchen-sink world imports.
fn imports(resolve: &Resolve, world: wit_parser::WorldId) -> Vec<Import> {
    let mut found = Vec::new();
    for (key, item) in &resolve.worlds[world].imports {
        let id = match item {
            WorldItem::Interface { id, .. } => id,
            WorldItem::Function(f) => panic!("a world-level import: {}", f.name),
            _ => continue,
        };
        let module = resolve.name_world_key(key);
        let interface = &resolve.interfaces[*id];
        for (name, ty) in &interface.types {
            if matches!(resolve.types[*ty].kind, TypeDefKind::Resource) {
                found.push(Import {
                    module: module.clone(),
                    name: format!("[resource-drop]{name}"),
                    params: vec![ValType::I32],
                    results: vec![],
                    retptr: false,
                    returns_resource: false,
                });
            }
        }
        for func in interface.functions.values() {
            let sig = resolve.wasm_signature(AbiVariant::GuestImport, func);
            found.push(Import {
                module: module.clone(),
                name: func.name.clone(),
                params: sig.params.iter().map(core_type).collect(),
                results: sig.results.iter().map(core_type).collect(),
                retptr: sig.retptr,
                returns_resource: func
                    .result
                    .as_ref()
                    .is_some_and(|t| holds_resource(resolve, t)),
            });
        }
    }
    found
}

/// Where a call's results go, and where the bump allocator starts.
const RESULTS: i32 = 1024;
const HEAP_START: i32 = 4096;
const MEMORY_PAGES: u64 = 4;

/// The core module: imports `imports` (functions 0..n), then defines `cabi_realloc`,
/// `probe`, `flood`, a wrapper that calls nothing, and one wrapper per import; a table
/// holds the wrappers, the nothing first. Each wrapper passes `i64_arg` for every 64-bit
/// argument (a length) and zero for the others.
fn core_module_with(imports: &[Import], i64_arg: i64) -> Vec<u8> {
    let n = imports.len() as u32;
    let mut module = Module::new();
    let mut types = TypeSection::new();
    for import in imports {
        types
            .ty()
            .function(import.params.clone(), import.results.clone());
    }
    let (realloc_ty, which_ty, wrapper_ty) = (n, n + 1, n + 2);
    types.ty().function([ValType::I32; 4], [ValType::I32]);
    types.ty().function([ValType::I32], []);
    types.ty().function([], []);
    module.section(&types);

    let mut section = ImportSection::new();
    for (i, import) in imports.iter().enumerate() {
        section.import(&import.module, &import.name, EntityType::Function(i as u32));
    }
    module.section(&section);

    let (realloc, probe, flood, nothing) = (n, n + 1, n + 2, n + 3);
    let mut functions = FunctionSection::new();
    functions.function(realloc_ty);
    functions.function(which_ty);
    functions.function(which_ty);
    for _ in 0..=n {
        functions.function(wrapper_ty);
    }
    module.section(&functions);

    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: u64::from(n + 1),
        maximum: Some(u64::from(n + 1)),
        shared: false,
    });
    module.section(&tables);

    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: MEMORY_PAGES,
        maximum: Some(MEMORY_PAGES),
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    module.section(&memories);

    let mut globals = GlobalSection::new();
    globals.global(
        GlobalType {
            val_type: ValType::I32,
            mutable: true,
            shared: false,
        },
        &ConstExpr::i32_const(HEAP_START),
    );
    module.section(&globals);

    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("cabi_realloc", ExportKind::Func, realloc);
    exports.export("probe", ExportKind::Func, probe);
    exports.export("flood", ExportKind::Func, flood);
    module.section(&exports);

    let mut elements = ElementSection::new();
    let wrappers: Vec<u32> = (nothing..=nothing + n).collect();
    elements.active(
        Some(0),
        &ConstExpr::i32_const(0),
        Elements::Functions(wrappers[..].into()),
    );
    module.section(&elements);

    use Instruction as I;
    let mut code = CodeSection::new();
    // cabi_realloc: a bump allocator; past the memory it traps.
    let mut f = Function::new([(1, ValType::I32)]);
    for i in [
        I::GlobalGet(0),
        I::LocalGet(2),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        I::I32Const(0),
        I::LocalGet(2),
        I::I32Sub,
        I::I32And,
        I::LocalTee(4),
        I::LocalGet(3),
        I::I32Add,
        I::GlobalSet(0),
        I::GlobalGet(0),
        I::I32Const((MEMORY_PAGES * 65536) as i32),
        I::I32GtU,
        I::If(wasm_encoder::BlockType::Empty),
        I::Unreachable,
        I::End,
        I::LocalGet(4),
        I::End,
    ] {
        f.instruction(&i);
    }
    code.function(&f);
    // probe(which): one call of wrapper `which`.
    let mut f = Function::new([]);
    for i in [
        I::LocalGet(0),
        I::CallIndirect {
            type_index: wrapper_ty,
            table_index: 0,
        },
        I::End,
    ] {
        f.instruction(&i);
    }
    code.function(&f);
    // flood(which): calls of wrapper `which` for ever (the heap is reset each time).
    let mut f = Function::new([]);
    for i in [
        I::Loop(wasm_encoder::BlockType::Empty),
        I::I32Const(HEAP_START),
        I::GlobalSet(0),
        I::LocalGet(0),
        I::CallIndirect {
            type_index: wrapper_ty,
            table_index: 0,
        },
        I::Br(0),
        I::End,
        I::End,
    ] {
        f.instruction(&i);
    }
    code.function(&f);
    let mut f = Function::new([]);
    f.instruction(&I::End);
    code.function(&f);
    for (k, import) in imports.iter().enumerate() {
        let mut f = Function::new([]);
        let last = import.params.len().saturating_sub(1);
        for (p, ty) in import.params.iter().enumerate() {
            f.instruction(&match ty {
                ValType::I32 if import.retptr && p == last => I::I32Const(RESULTS),
                ValType::I32 => I::I32Const(0),
                ValType::I64 => I::I64Const(i64_arg),
                ValType::F32 => I::F32Const(0.0f32.into()),
                ValType::F64 => I::F64Const(0.0f64.into()),
                other => panic!("no zero for {other:?}"),
            });
        }
        f.instruction(&I::Call(k as u32));
        for _ in &import.results {
            f.instruction(&I::Drop);
        }
        f.instruction(&I::End);
        code.function(&f);
    }
    module.section(&code);
    module.finish()
}

/// The kitchen-sink component and the imports it calls (wrapper `k + 1` calls import `k`).
fn kitchen_sink() -> (Vec<u8>, Vec<Import>) {
    kitchen_sink_with(|_| true, 0)
}

/// The kitchen sink of the imports `keep` keeps, each wrapper passing `i64_arg` for
/// every 64-bit argument.
fn kitchen_sink_with(keep: impl Fn(&Import) -> bool, i64_arg: i64) -> (Vec<u8>, Vec<Import>) {
    let (resolve, world) = kitchen_sink_wit();
    let imports: Vec<Import> = imports(&resolve, world).into_iter().filter(keep).collect();
    let mut module = core_module_with(&imports, i64_arg);
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
        false,
    )
    .expect("metadata embeds");
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .expect("the core module fits the world")
        .encode()
        .expect("the component encodes");
    (component, imports)
}

const MEMORY: u64 = 64 << 20;

/// A fresh instance in a fresh store of the sandbox, armed with `fuel`.
async fn instance(
    sandbox: &Sandbox,
    pre: &InstancePre<State>,
    fuel: u64,
) -> (Store<State>, wasmtime::component::Instance) {
    let plugin: Arc<str> = Arc::from("kitchen-sink");
    let mut store = sandbox
        .store(
            &plugin,
            &Live::default(),
            &[],
            MEMORY,
            &[],
            super::grants::StoreGuard {
                hook: plugin.clone(),
                places: Arc::new(super::grants::PlaceGuard::new(&[])),
            },
        )
        .expect("a store");
    let limits = Limits {
        fuel,
        memory_bytes: MEMORY,
        timeout: Duration::from_secs(600),
    };
    limits.arm(&mut store).expect("armed");
    let instance = pre
        .instantiate_async(&mut store)
        .await
        .expect("the kitchen sink instantiates");
    (store, instance)
}

/// Calls export `name` with `which` in a fresh instance: the fuel it took, and whether
/// it returned.
async fn call(
    sandbox: &Sandbox,
    pre: &InstancePre<State>,
    name: &str,
    which: u32,
    fuel: u64,
) -> (u64, wasmtime::Result<()>, Store<State>) {
    let (mut store, instance) = instance(sandbox, pre, fuel).await;
    let func = instance
        .get_typed_func::<(u32,), ()>(&mut store, name)
        .expect("the export");
    let before = store.get_fuel().unwrap();
    let result = func.call_async(&mut store, (which,)).await;
    let used = before - store.get_fuel().unwrap();
    (used, result, store)
}

fn describe(import: &Import) -> String {
    format!("`{}#{}`", import.module, import.name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_import_of_the_linker_is_charged_per_call() {
    let (bytes, imports) = kitchen_sink();
    let sandbox =
        Sandbox::new(None, false, DEFAULT_MAX_PLUGIN_BYTES, None, None).expect("a sandbox");
    let component = Component::new(&sandbox.engine, &bytes).expect("it compiles");
    // The linker of a hook with an HTTP grant defines every import of the kitchen sink.
    let pre = sandbox
        .linkers
        .http()
        .expect("the linker of a hook with an HTTP grant")
        .instantiate_pre(&component)
        .expect("the linker provides every import of the kitchen sink");
    // Every interface of the WASI packages is imported, except those a component exports.
    let (resolve, world) = kitchen_sink_wit();
    let imported: Vec<_> = resolve.worlds[world]
        .imports
        .values()
        .filter_map(|item| match item {
            WorldItem::Interface { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    for (id, interface) in resolve.interfaces.iter() {
        let name = resolve.id_of(id).unwrap_or_default();
        let exported_by_guests = [
            "wasi:http/incoming-handler",
            "wasi:cli/run",
            "hookhost:hook/hook",
        ];
        if exported_by_guests.iter().any(|e| name.starts_with(e)) || interface.name.is_none() {
            continue;
        }
        assert!(imported.contains(&id), "the kitchen sink leaves out {name}");
    }
    assert!(imports.len() > 150, "{} imports", imports.len());

    let (baseline, returned, _) = call(&sandbox, &pre, "probe", 0, 1_000_000).await;
    returned.expect("the wasm-only call returns");
    assert!(
        baseline < FUEL_PER_HOST_CALL,
        "a wasm-only call took {baseline}"
    );
    let mut uncharged = Vec::new();
    for (k, import) in imports.iter().enumerate() {
        let (used, _, store) = call(&sandbox, &pre, "probe", k as u32 + 1, 1_000_000).await;
        let calls = store.data().host_calls;
        if used < baseline + FUEL_PER_HOST_CALL || calls == 0 {
            uncharged.push(format!(
                "{}: {used} fuel, {calls} host calls",
                describe(import)
            ));
        }
    }
    assert!(
        uncharged.is_empty(),
        "host calls not charged {FUEL_PER_HOST_CALL} fuel:\n{}",
        uncharged.join("\n")
    );
}

/// A sandbox, and the component `bytes` linked as for a hook with an HTTP grant.
fn linked_with_http(bytes: &[u8]) -> (Sandbox, InstancePre<State>) {
    let sandbox =
        Sandbox::new(None, false, DEFAULT_MAX_PLUGIN_BYTES, None, None).expect("a sandbox");
    let component = Component::new(&sandbox.engine, bytes).expect("it compiles");
    let pre = sandbox
        .linkers
        .http()
        .expect("the linker of a hook with an HTTP grant")
        .instantiate_pre(&component)
        .expect("it links");
    (sandbox, pre)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_every_import_ends_on_the_default_fuel() {
    let (bytes, imports) = kitchen_sink();
    let (sandbox, pre) = linked_with_http(&bytes);
    let started = Instant::now();
    let (_, looped, _) = call(&sandbox, &pre, "flood", 0, DEFAULT_FUEL).await;
    let wasm_loop = started.elapsed();
    assert_eq!(
        looped.unwrap_err().downcast_ref::<Trap>(),
        Some(&Trap::OutOfFuel)
    );
    let mut flooded = 0;
    let mut slowest = (Duration::ZERO, String::new());
    for (k, import) in imports.iter().enumerate() {
        let which = k as u32 + 1;
        // Imports that trap on zeroed arguments, or hand out a resource per call (the
        // hoarding tests cover those), are not flooded here.
        let (_, once, _) = call(&sandbox, &pre, "probe", which, 1_000_000).await;
        if once.is_err() || import.returns_resource {
            continue;
        }
        let started = Instant::now();
        let (_, flood, store) = call(&sandbox, &pre, "flood", which, DEFAULT_FUEL).await;
        let took = started.elapsed();
        let error = flood.expect_err("a flood never returns");
        assert_eq!(
            error.downcast_ref::<Trap>(),
            Some(&Trap::OutOfFuel),
            "{}: {error:?}",
            describe(import)
        );
        let data = store.data();
        assert!(
            data.host_calls > 0 && data.host_fuel >= data.host_calls * FUEL_PER_HOST_CALL / 2,
            "{}: {} calls, {} host fuel",
            describe(import),
            data.host_calls,
            data.host_fuel
        );
        if took > slowest.0 {
            slowest = (took, describe(import));
        }
        flooded += 1;
    }
    assert!(flooded >= 10, "only {flooded} imports flooded");
    // Reported, not asserted (no timed assertions): how a flood compares with a loop.
    eprintln!(
        "{flooded} floods; wasm loop {wasm_loop:?}; slowest flood {:?} ({}): {:.1}x",
        slowest.0,
        slowest.1,
        slowest.0.as_secs_f64() / wasm_loop.as_secs_f64()
    );
}

/// What kept session instances are evicted by: linear memory, held host memory, each
/// pollable by its size, and every other resource at the most one may hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_store_footprint_counts_what_its_resources_hold() {
    let sandbox =
        Sandbox::new(None, false, DEFAULT_MAX_PLUGIN_BYTES, None, None).expect("a sandbox");
    let plugin: Arc<str> = Arc::from("footprint");
    let mut store = sandbox
        .store(
            &plugin,
            &Live::default(),
            &[],
            MEMORY,
            &[],
            super::grants::StoreGuard {
                hook: plugin.clone(),
                places: Arc::new(super::grants::PlaceGuard::new(&[])),
            },
        )
        .expect("a store");
    let data = store.data_mut();
    // wasi-http's buffers follow the memory limit.
    let entry = super::held::entry_bytes(usize::try_from(MEMORY).unwrap());
    assert_eq!(data.entry_bytes, entry);
    assert_eq!(data.http_policy.body_chunk(), entry);
    let empty = data.footprint();
    let far = Instant::now() + Duration::from_secs(3600);
    let pollables: Vec<_> = (0..10).map(|_| data.sleep_until(far).unwrap()).collect();
    // A sleep is two entries, the sleep and its pollable, each of a pollable's size.
    assert_eq!(data.footprint(), empty + 20 * super::held::POLLABLE_BYTES);
    data.limiter.hold(1000).unwrap();
    assert_eq!(
        data.footprint(),
        empty + 20 * super::held::POLLABLE_BYTES + 1000
    );
    // Any other entry counts at the most one may hold.
    let other = data.table.push(7u32).unwrap();
    assert_eq!(
        data.footprint(),
        empty + 20 * super::held::POLLABLE_BYTES + 1000 + entry
    );
    drop((pollables, other));
}

/// A host call whose work scales with an argument is charged for that work, not only
/// per call: `get-random-bytes(len)` made the host draw `len` bytes (up to 1 MiB) for
/// the 100 fuel of one call, a flood of host work ~10,000 times cheaper than a wasm loop
/// (red team, issue 23). The work is charged per byte before it is done (here the
/// guest's memory is too small for the answer, so the call traps after the host's work).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_bytes_are_charged_per_byte_asked_for() {
    const LEN: i64 = 1 << 20;
    let (bytes, imports) = kitchen_sink_with(|i| i.name.ends_with("random-bytes"), LEN);
    assert_eq!(
        imports.len(),
        2,
        "get-random-bytes and get-insecure-random-bytes"
    );
    let (sandbox, pre) = linked_with_http(&bytes);
    for (k, import) in imports.iter().enumerate() {
        let (used, _, _) = call(&sandbox, &pre, "probe", k as u32 + 1, 100_000_000).await;
        assert!(
            used >= LEN as u64,
            "{} of {LEN} bytes took {used} fuel",
            describe(import)
        );
    }
}
