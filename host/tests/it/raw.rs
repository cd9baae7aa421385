//! Hostile components assembled instruction by instruction: a core module written with
//! `wasm-encoder` that implements the `plugin` world of `wit/v0.1.0/hook.wit` through the
//! canonical ABI by hand, wrapped into a component with `wit-component`. No toolchain
//! and no SDK stands between the attacker and the host: these do what compiled
//! languages do not emit (growing tables, many memories, spinning in `describe`).
//!
//! The module answers with zeroed memory, which the canonical ABI reads as an empty
//! `plugin-info` from `describe` and `ok(response)` with every field unset from
//! `handle`.

use std::path::{Path, PathBuf};

use wasm_encoder::{
    BlockType, CodeSection, ConstExpr, ElementSection, Elements, ExportKind, ExportSection,
    Function, FunctionSection, GlobalSection, GlobalType, Instruction, MemorySection, MemoryType,
    Module, RefType, StartSection, TableSection, TableType, TypeSection, ValType,
};

/// What the component does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Raw {
    /// `describe` never returns.
    DescribeSpins,
    /// `handle` grows its table by a million elements (each set to a function
    /// reference) until the host refuses.
    TableGrow,
    /// `handle` grows ten memories by 16 MiB at a time until the host refuses.
    Memories,
    /// The core module's start function (run as the component is instantiated) and
    /// `handle` each count down from [`BURN`]: about 5 units of fuel per step.
    StartBurns,
    /// `describe` and `handle` each count down from [`BURN`].
    DescribeBurns,
}

/// The steps of each countdown of [`Raw::StartBurns`].
pub const BURN: i32 = 1_000_000;

const MEMORIES: u32 = 10;
/// Where `describe`'s and `handle`'s zeroed answers are, and where the heap starts.
const DESCRIBE_AREA: i32 = 16;
const RESULT_AREA: i32 = 256;
const HEAP_START: i32 = 4096;

fn core_module(kind: Raw) -> Vec<u8> {
    let mut module = Module::new();
    let mut types = TypeSection::new();
    // 0: cabi_realloc(old_ptr, old_size, align, new_size) -> ptr
    types.ty().function([ValType::I32; 4], [ValType::I32]);
    // 1: describe() -> ptr
    types.ty().function([], [ValType::I32]);
    // 2: handle(event: 16 flat i32) -> ptr
    types.ty().function([ValType::I32; 16], [ValType::I32]);
    // 3: a function to reference
    types.ty().function([], []);
    module.section(&types);

    let mut functions = FunctionSection::new();
    // 0: cabi_realloc, 1: describe, 2: handle, 3: nothing, 4: the start function
    for ty in [0, 1, 2, 3, 3] {
        functions.function(ty);
    }
    module.section(&functions);

    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        table64: false,
        minimum: 1,
        maximum: None,
        shared: false,
    });
    module.section(&tables);

    let mut memories = MemorySection::new();
    let count = if kind == Raw::Memories { MEMORIES } else { 1 };
    for i in 0..count {
        memories.memory(MemoryType {
            minimum: u64::from(i == 0),
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
    }
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
    exports.export("cabi_realloc", ExportKind::Func, 0);
    exports.export("hookhost:hook/hook@0.1.0#describe", ExportKind::Func, 1);
    exports.export("hookhost:hook/hook@0.1.0#handle", ExportKind::Func, 2);
    module.section(&exports);

    if kind == Raw::StartBurns {
        module.section(&StartSection { function_index: 4 });
    }

    let mut elements = ElementSection::new();
    elements.declared(Elements::Functions([3u32][..].into()));
    module.section(&elements);

    let mut code = CodeSection::new();
    code.function(&realloc());
    code.function(&describe(kind));
    code.function(&handle(kind));
    let mut nothing = Function::new([]);
    nothing.instruction(&Instruction::End);
    code.function(&nothing);
    let mut start = Function::new([(1, ValType::I32)]);
    if kind == Raw::StartBurns {
        countdown(&mut start, 0);
    }
    start.instruction(&Instruction::End);
    code.function(&start);
    module.section(&code);
    module.finish()
}

/// A bump allocator over memory 0 that grows it as needed.
fn realloc() -> Function {
    use Instruction as I;
    let mut f = Function::new([(1, ValType::I32)]);
    let ptr = 4;
    for i in [
        // ptr = (heap + align - 1) & -align
        I::GlobalGet(0),
        I::LocalGet(2),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        I::I32Const(0),
        I::LocalGet(2),
        I::I32Sub,
        I::I32And,
        I::LocalTee(ptr),
        // heap = ptr + new_size
        I::LocalGet(3),
        I::I32Add,
        I::GlobalSet(0),
        // while heap > memory.size * 64 KiB: grow by one page (trap if refused)
        I::Block(BlockType::Empty),
        I::Loop(BlockType::Empty),
        I::GlobalGet(0),
        I::MemorySize(0),
        I::I32Const(16),
        I::I32Shl,
        I::I32LeU,
        I::BrIf(1),
        I::I32Const(1),
        I::MemoryGrow(0),
        I::I32Const(-1),
        I::I32Eq,
        I::If(BlockType::Empty),
        I::Unreachable,
        I::End,
        I::Br(0),
        I::End,
        I::End,
        I::LocalGet(ptr),
        I::End,
    ] {
        f.instruction(&i);
    }
    f
}

/// Counts local `counter` down from [`BURN`] to zero.
fn countdown(f: &mut Function, counter: u32) {
    use Instruction as I;
    for i in [
        I::I32Const(BURN),
        I::LocalSet(counter),
        I::Loop(BlockType::Empty),
        I::LocalGet(counter),
        I::I32Const(1),
        I::I32Sub,
        I::LocalTee(counter),
        I::BrIf(0),
        I::End,
    ] {
        f.instruction(&i);
    }
}

fn describe(kind: Raw) -> Function {
    use Instruction as I;
    let mut f = Function::new([(1, ValType::I32)]);
    if kind == Raw::DescribeSpins {
        for i in [I::Loop(BlockType::Empty), I::Br(0), I::End] {
            f.instruction(&i);
        }
    }
    if kind == Raw::DescribeBurns {
        countdown(&mut f, 0);
    }
    f.instruction(&I::I32Const(DESCRIBE_AREA));
    f.instruction(&I::End);
    f
}

fn handle(kind: Raw) -> Function {
    use Instruction as I;
    // After the 16 parameters: a counter.
    let mut f = Function::new([(1, ValType::I32)]);
    match kind {
        Raw::DescribeSpins => {}
        Raw::StartBurns | Raw::DescribeBurns => countdown(&mut f, 16),
        Raw::TableGrow => {
            for i in [
                I::Block(BlockType::Empty),
                I::Loop(BlockType::Empty),
                I::RefFunc(3),
                I::I32Const(1_000_000),
                I::TableGrow(0),
                I::I32Const(-1),
                I::I32Eq,
                I::BrIf(1),
                I::Br(0),
                I::End,
                I::End,
            ] {
                f.instruction(&i);
            }
        }
        Raw::Memories => {
            for memory in 0..MEMORIES {
                for i in [
                    I::Block(BlockType::Empty),
                    I::Loop(BlockType::Empty),
                    I::I32Const(256),
                    I::MemoryGrow(memory),
                    I::I32Const(-1),
                    I::I32Eq,
                    I::BrIf(1),
                    I::Br(0),
                    I::End,
                    I::End,
                ] {
                    f.instruction(&i);
                }
            }
        }
    }
    f.instruction(&I::I32Const(RESULT_AREA));
    f.instruction(&I::End);
    f
}

/// The component of `kind`, written to a file under `dir` (once per kind and dir).
pub fn component(kind: Raw, dir: &Path) -> PathBuf {
    let path = dir.join(format!("raw-{kind:?}.wasm").to_lowercase());
    if path.exists() {
        return path;
    }
    let mut resolve = wit_parser::Resolve::default();
    // Built for 0.1.0 (frozen in wit/v0.1.0), which hookhost keeps loading beside 0.2.0.
    let wit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wit/v0.1.0");
    let (package, _) = resolve.push_dir(&wit).expect("the WIT parses");
    let world = resolve
        .select_world(&[package], Some("plugin"))
        .expect("the plugin world");
    let mut module = core_module(kind);
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
    std::fs::create_dir_all(dir).unwrap();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, component).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}
