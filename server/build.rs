//! Lets the binaries find libchdb.so without LD_LIBRARY_PATH: next to the binary, in `../lib`
//! (the container layout), and where the build found it (a developer's checkout).
fn main() {
    println!("cargo:rerun-if-env-changed=CHDB_LIB_DIR");
    println!("cargo:rustc-link-arg=-Wl,-rpath,$ORIGIN:$ORIGIN/../lib");
    if let Some(dir) = std::env::var_os("CHDB_LIB_DIR") {
        let dir = std::path::Path::new(&dir);
        // The link itself first: `.deps/chdb` is a link that `scripts/setup` may repoint.
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        // Then what it points to (the shared cache): a binary in a shared target directory
        // outlives the checkout that built it (CI builds in a fresh clone it then deletes).
        if let Ok(real) = dir.canonicalize() {
            if real != dir {
                println!("cargo:rustc-link-arg=-Wl,-rpath,{}", real.display());
            }
        }
    }
}
