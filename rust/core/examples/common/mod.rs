//! Command-line options shared by the examples.

use std::collections::HashMap;

/// The `--name value` pairs of the command line, by name (a later repeat
/// wins), or the problem with the first argument that is not one.
pub fn options() -> Result<HashMap<String, String>, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = HashMap::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let name = flag
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {flag}"))?;
        let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
        opts.insert(name.to_string(), value.clone());
    }
    Ok(opts)
}
