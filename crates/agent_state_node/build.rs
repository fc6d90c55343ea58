// Sets the linker flags a Node addon needs (its Node-API symbols are resolved by the loading
// node process, not at link time).
fn main() {
    napi_build::setup();
}
