//! The viewer's static files, embedded in the binary at build time so the
//! node serves its page with no files beside it and no network (the page
//! loads nothing from elsewhere; three.js is vendored, see
//! `src/http/viewer/vendor/README.md`). Owns the table path -> bytes and type.

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
    Asset {
        path: "/view3d.js",
        content_type: JS,
        body: include_str!("viewer/view3d.js"),
    },
    Asset {
        path: "/areas.js",
        content_type: JS,
        body: include_str!("viewer/areas.js"),
    },
    Asset {
        path: "/placement.js",
        content_type: JS,
        body: include_str!("viewer/placement.js"),
    },
    Asset {
        path: "/vendor/three.module.min.js",
        content_type: JS,
        body: include_str!("viewer/vendor/three.module.min.js"),
    },
    Asset {
        path: "/vendor/three.core.min.js",
        content_type: JS,
        body: include_str!("viewer/vendor/three.core.min.js"),
    },
    Asset {
        path: "/vendor/OrbitControls.js",
        content_type: JS,
        body: include_str!("viewer/vendor/OrbitControls.js"),
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

    /// Absolute URLs the vendored library's text contains that load nothing:
    /// the XHTML namespace it creates elements in, and a paper cited in a
    /// shader comment.
    const INERT_URLS: &[&str] = &[
        "http://www.w3.org/1999/xhtml",
        "https://jcgt.org/published/0007/04/01/",
    ];

    /// Every absolute URL in `text` (up to a quote, space or backslash).
    fn urls(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (start, _) in text.match_indices("http") {
            let rest = &text[start..];
            if rest.starts_with("http://") || rest.starts_with("https://") {
                let end = rest
                    .find(|c: char| {
                        c == '"' || c == '\'' || c == '`' || c == '\\' || c.is_whitespace()
                    })
                    .unwrap_or(rest.len());
                out.push(&rest[..end]);
            }
        }
        out
    }

    #[test]
    fn the_page_refers_only_to_embedded_files() {
        let page = find("/").unwrap().body;
        for asset in ASSETS.iter().filter(|a| a.path != "/") {
            let name = asset.path.trim_start_matches('/');
            let file = name.rsplit('/').next().unwrap();
            assert!(
                page.contains(name)
                    || ASSETS.iter().any(|a| {
                        a.body.contains(&format!("./{name}"))
                            || a.body.contains(&format!("./{file}"))
                    }),
                "{name} is not used"
            );
        }
        for asset in ASSETS {
            for url in urls(asset.body) {
                assert!(
                    asset.path.starts_with("/vendor/") && INERT_URLS.contains(&url),
                    "{} loads from elsewhere: {url}",
                    asset.path
                );
            }
        }
        assert!(find("/index.html").is_some());
        assert!(find("/nope.js").is_none());
    }
}
