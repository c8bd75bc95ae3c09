//! The hydrate bundle's size as a browser downloads it: `idem.wasm` and `idem.js`, as
//! `cargo leptos build --release` leaves them, each compressed with gzip (default level).

use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::Path;

/// The files of the bundle, in the site's `pkg` folder.
const FILES: [&str; 2] = ["idem.wasm", "idem.js"];

/// The gzipped size in KB (1024 bytes) of the bundle's files in `pkg`; `None` without the
/// wasm file (the UI was not built).
pub fn gzipped_kb(pkg: &Path) -> std::io::Result<Option<f64>> {
    if !pkg.join(FILES[0]).is_file() {
        return Ok(None);
    }
    let mut bytes = 0;
    for name in FILES {
        let path = pkg.join(name);
        if path.is_file() {
            bytes += gzipped_len(&std::fs::read(&path)?)?;
        }
    }
    Ok(Some(bytes as f64 / 1024.0))
}

fn gzipped_len(content: &[u8]) -> std::io::Result<usize> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(content)?;
    Ok(encoder.finish()?.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder() -> std::path::PathBuf {
        let folder = std::env::temp_dir().join(format!("idem-bundle-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&folder).unwrap();
        folder
    }

    #[test]
    fn the_size_is_of_both_files_gzipped() {
        let pkg = folder();
        std::fs::write(pkg.join("idem.wasm"), vec![7u8; 200 * 1024]).unwrap();
        std::fs::write(
            pkg.join("idem.js"),
            "export function start() {}\n".repeat(1000),
        )
        .unwrap();
        let kb = gzipped_kb(&pkg).unwrap().expect("measured");
        let expected = gzipped_len(&[7u8; 200 * 1024]).unwrap()
            + gzipped_len("export function start() {}\n".repeat(1000).as_bytes()).unwrap();
        assert_eq!(kb, expected as f64 / 1024.0);
        assert!(
            kb > 0.0 && kb < 5.0,
            "repetitive content compresses: {kb} KB"
        );
        std::fs::remove_dir_all(pkg).unwrap();
    }

    #[test]
    fn without_the_wasm_file_the_bundle_is_not_measured() {
        let pkg = folder();
        std::fs::write(pkg.join("idem.js"), "x").unwrap();
        assert_eq!(gzipped_kb(&pkg).unwrap(), None);
        std::fs::remove_dir_all(pkg).unwrap();
    }
}
