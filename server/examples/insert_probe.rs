//! Finds the engine memory one flush's insert needs: `cargo run --release -p sluice-server
//! --example insert_probe -- POINTS [FIELDS]` builds a measurement batch of POINTS rows
//! (10,000 series, FIELDS float fields, 5 by default) as the flush does, then inserts it the
//! way `Engine::insert` does into a table of a fresh engine, under a per-query memory limit
//! halved or raised until the smallest limit that passes is known to 1 MiB. It prints that
//! limit, the Arrow batch's own size (the server's heap, outside the engine's tracker), and
//! both per point: the basis of `memory::INSERT_BYTES_PER_POINT`. `PROBE_SETTINGS=", name =
//! value"` adds settings to the insert.
use chdb_rust::arrow::array::{Array, RecordBatch, StructArray};
use chdb_rust::arrow::ffi::{to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use chdb_rust::arrow_stream::{arrow_stream_table_sql, ArrowArray, ArrowSchema};
use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;
use sluice_core::batch::{ColumnValues, FieldColumn, FieldType, MeasurementBatch};
use sluice_server::arrow_batch::measurement_batches;
use sluice_server::catalog::ddl::create_table_sql;
use sluice_server::engine::WHOLE_INSERT;

fn batch(points: usize, fields: usize) -> RecordBatch {
    let series = 10_000u64;
    let mut b = MeasurementBatch {
        measurement: "m".into(),
        time_ns: Vec::new(),
        series_id: Vec::new(),
        line: Vec::new(),
        fields: Vec::new(),
        series: Vec::new(),
    };
    for i in 0..points as u64 {
        b.series_id.push(i % series);
        b.time_ns
            .push(1_700_000_000_000_000_000 + (i / series) as i64 * 1_000_000_000);
    }
    for f in 0..fields {
        let values: Vec<f64> = (0..points).map(|i| (i * (f + 1)) as f64 * 0.37).collect();
        b.fields.push(FieldColumn {
            name: format!("f{f}"),
            values: ColumnValues::Float(values),
            valid: vec![true; points],
        });
    }
    measurement_batches(&[b], &[1]).expect("batch")
}

fn insert(conn: &Connection, batch: &RecordBatch, limit: u64, n: u64) -> Result<(), String> {
    let columns: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| format!("`{}`", f.name()))
        .collect();
    let sa = StructArray::from(batch.clone());
    let (ffi_array, ffi_schema): (FFI_ArrowArray, FFI_ArrowSchema) =
        to_ffi(&sa.into()).map_err(|e| e.to_string())?;
    // SAFETY: both FFI structs outlive the registration (unregistered below).
    let schema = unsafe { ArrowSchema::from_raw(&ffi_schema as *const _ as *mut _) };
    let array = unsafe { ArrowArray::from_raw(&ffi_array as *const _ as *mut _) };
    let name = format!("probe_{n}");
    conn.register_arrow_array(&name, &schema, &array)
        .map_err(|e| e.to_string())?;
    let sql = format!(
        "INSERT INTO m ({}) SELECT * FROM {} SETTINGS insert_allow_materialized_columns = 1, {WHOLE_INSERT}, insert_deduplicate = 0, max_memory_usage = {limit}{}",
        columns.join(", "),
        arrow_stream_table_sql(&name),
        std::env::var("PROBE_SETTINGS").unwrap_or_default()
    );
    let r = conn.query(&sql, OutputFormat::Null);
    let _ = conn.unregister_arrow_table(&name);
    drop(ffi_array);
    drop(ffi_schema);
    r.map(|_| ()).map_err(|e| e.to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let points: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(401_954);
    let fields: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = format!("--path={}", dir.path().join("chdb").display());
    let conn = Connection::open(&[path.as_str()]).expect("open the engine");
    let b = batch(points, fields);
    let cols: Vec<(String, FieldType)> = (0..fields)
        .map(|f| (format!("f{f}"), FieldType::Float))
        .collect();
    conn.query(&create_table_sql("m", None, &cols), OutputFormat::Null)
        .expect("create");
    let arrow: usize = b.columns().iter().map(|c| c.get_array_memory_size()).sum();
    let (mut lo, mut hi) = (1u64 << 20, 4u64 << 30);
    let mut n = 0;
    while hi - lo > 1 << 20 {
        let mid = lo + (hi - lo) / 2;
        n += 1;
        match insert(&conn, &b, mid, n) {
            Ok(()) => hi = mid,
            Err(e) if e.contains("memory limit") => lo = mid,
            Err(e) => panic!("insert: {e}"),
        }
    }
    let mib = |v: u64| v as f64 / (1 << 20) as f64;
    println!(
        "points {points} fields {fields}: engine needs {:.1} MiB ({:.0} B/point); the Arrow batch {:.1} MiB ({:.0} B/point)",
        mib(hi),
        hi as f64 / points as f64,
        mib(arrow as u64),
        arrow as f64 / points as f64
    );
}
