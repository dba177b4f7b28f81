//! Times SQL in the engine alone, whole and streamed, to tell the engine's cost of a planned
//! query from the server's: `cargo run --release -p sluice-server --example sql_probe --
//! DATA_DIR FILE [repeat] [setting=value ...]` with one statement per line of FILE (repeat 0: each
//! once, for statements that change something) (a stopped
//! server's `data-dir/chdb`, or a copy: one process per engine path).
use std::time::Instant;

use chdb_rust::connection::Connection;
use chdb_rust::format::OutputFormat;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(file)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: sql_probe DATA_DIR FILE [repeat] [setting=value ...]");
        std::process::exit(2);
    };
    let repeat: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut open = vec![format!("--path={dir}")];
    open.extend(args.iter().skip(4).map(|s| format!("--{s}")));
    let open: Vec<&str> = open.iter().map(String::as_str).collect();
    let mut conn = Connection::open(&open).expect("open the engine");
    let text = std::fs::read_to_string(file).expect("read the statements");
    for (n, sql) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
        if repeat == 0 {
            // Once, for statements that change something (a table to compare against).
            let t = Instant::now();
            let r = conn.query(sql, OutputFormat::TabSeparated);
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            match r {
                Ok(r) => println!("{n}: {ms:.1} ms: {}", r.data_utf8_lossy().trim()),
                Err(e) => println!("{n}: error {e}"),
            }
            continue;
        }
        let mut whole = Vec::new();
        let mut streamed = Vec::new();
        let mut bytes = 0;
        let reopen = std::env::var_os("PROBE_REOPEN").is_some();
        for _ in 0..repeat {
            let t = Instant::now();
            if reopen {
                conn = Connection::open(&open).expect("reopen the engine");
            }
            match conn.query(sql, OutputFormat::JSONCompactEachRow) {
                Ok(r) => bytes = r.data_ref().len(),
                Err(e) => {
                    println!("{n}: error {e}");
                    break;
                }
            }
            whole.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let mut stream = conn
                .query_stream(sql, OutputFormat::JSONCompactEachRow)
                .expect("stream");
            loop {
                match stream.next_chunk() {
                    Ok(Some(_)) => continue,
                    Ok(None) => break,
                    Err(e) => {
                        println!("{n}: streamed: error {e}");
                        break;
                    }
                }
            }
            drop(stream);
            streamed.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        if whole.is_empty() {
            continue;
        }
        println!(
            "{n}: whole {:.1} ms (min {:.1}), streamed {:.1} ms, {bytes} bytes: {}",
            median(whole.clone()),
            whole.iter().cloned().fold(f64::MAX, f64::min),
            median(streamed),
            &sql[..sql.len().min(100)]
        );
    }
}
