//! The viewer's static files, embedded in the binary at build time so the
//! node serves its page with no files beside it and no network (the page
//! loads nothing from elsewhere). Owns the table path -> bytes and type.

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Request path.
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `src/http/viewer/`.
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("viewer/index.html"),
    },
    Asset {
        path: "/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("viewer/style.css"),
    },
    Asset {
        path: "/app.js",
        content_type: JS,
        body: include_str!("viewer/app.js"),
    },
    Asset {
        path: "/tundra.js",
        content_type: JS,
        body: include_str!("viewer/tundra.js"),
    },
    Asset {
        path: "/scene.js",
        content_type: JS,
        body: include_str!("viewer/scene.js"),
    },
    Asset {
        path: "/map.js",
        content_type: JS,
        body: include_str!("viewer/map.js"),
    },
];

/// The asset served at `path`.
pub fn find(path: &str) -> Option<&'static Asset> {
    let path = if path == "/index.html" { "/" } else { path };
    ASSETS.iter().find(|a| a.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_refers_only_to_embedded_files() {
        let page = find("/").unwrap().body;
        for asset in ASSETS.iter().filter(|a| a.path != "/") {
            let name = asset.path.trim_start_matches('/');
            assert!(
                page.contains(name) || ASSETS.iter().any(|a| a.body.contains(&format!("./{name}"))),
                "{name} is not used"
            );
        }
        for asset in ASSETS {
            assert!(
                !asset.body.contains("http://"),
                "{} loads from elsewhere",
                asset.path
            );
            assert!(
                !asset.body.contains("https://"),
                "{} loads from elsewhere",
                asset.path
            );
        }
        assert!(find("/index.html").is_some());
        assert!(find("/nope.js").is_none());
    }
}
