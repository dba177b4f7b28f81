//! Lets the binaries find libchdb.so without LD_LIBRARY_PATH: next to the binary, in `../lib`
//! (the container layout), and where the build found it (a developer's checkout).
fn main() {
    println!("cargo:rerun-if-env-changed=CHDB_LIB_DIR");
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib");
    if let Some(dir) = std::env::var_os("CHDB_LIB_DIR") {
        // Not canonicalized: `.deps/chdb` is a link that `scripts/setup` may repoint.
        println!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            std::path::Path::new(&dir).display()
        );
    }
}
