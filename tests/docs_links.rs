//! The documentation stays whole and stays in the repository: every relative link and anchor
//! in `README.md` and `docs/*.md` resolves to a file of the repository (and, for a Markdown
//! file, to one of its headings), and no link or bare address leaves the repository. A reader
//! of a fresh clone, on a forge or in the mdBook, never meets a dead link or a page elsewhere.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

/// The Markdown files whose links are checked: the README and every page of the book.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ exists");
    let mut pages: Vec<PathBuf> = docs
        .map(|entry| entry.expect("a readable entry of docs/").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    files
}

/// The extensions a forge renders (GitHub-flavoured tables, strikethrough, footnotes).
fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_FOOTNOTES
}

/// A heading's anchor as GitHub makes it: lowercase, punctuation dropped except `-` and `_`,
/// each space a `-`. Repeated headings get `-1`, `-2`, … in [`anchors`].
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

/// What one Markdown file offers and asks for.
#[derive(Default)]
struct Page {
    anchors: BTreeSet<String>,
    /// Link and image destinations, as written.
    links: Vec<String>,
    /// Addresses written as text outside code, which a forge turns into links.
    bare_addresses: Vec<String>,
}

fn read_page(text: &str) -> Page {
    let mut page = Page::default();
    let mut heading: Option<String> = None;
    let mut in_code_block = false;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Start(Tag::CodeBlock(_)) => in_code_block = true,
            Event::End(TagEnd::CodeBlock) => in_code_block = false,
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let count = seen.entry(base.clone()).or_insert(0);
                let anchor = match *count {
                    0 => base,
                    n => format!("{base}-{n}"),
                };
                *count += 1;
                page.anchors.insert(anchor);
            }
            Event::Text(text) | Event::Code(text) if heading.is_some() => {
                heading.as_mut().expect("inside a heading").push_str(&text);
            }
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links.push(dest_url.to_string());
            }
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text)
                if !in_code_block && text.contains("://") =>
            {
                page.bare_addresses.push(text.to_string());
            }
            _ => {}
        }
    }
    page
}

/// `path` with `.` and `..` folded, without touching the file system; `None` when it climbs
/// above the root it started from.
fn normalized(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<Component> = Vec::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !matches!(parts.last(), Some(Component::Normal(_))) {
                    return None;
                }
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

/// Why a link from `from` (relative to the repository root) is broken, if it is.
fn broken(root: &Path, from: &Path, link: &str, pages: &BTreeMap<PathBuf, Page>) -> Option<String> {
    let lower = link.to_ascii_lowercase();
    if lower.contains("://") || lower.starts_with("//") || lower.starts_with("mailto:") {
        return Some("leaves the repository".into());
    }
    let (target, anchor) = match link.split_once('#') {
        Some((target, anchor)) => (target, Some(anchor)),
        None => (link, None),
    };
    let file = if target.is_empty() {
        from.to_path_buf()
    } else if target.starts_with('/') {
        return Some("is absolute: forges and the book resolve it differently".into());
    } else {
        let joined = from.parent().unwrap_or(Path::new("")).join(target);
        match normalized(&joined) {
            Some(file) => file,
            None => return Some("leaves the repository".into()),
        }
    };
    if !root.join(&file).exists() {
        return Some(format!("names {}, which does not exist", file.display()));
    }
    let anchor = anchor?;
    match pages.get(&file) {
        Some(page) if page.anchors.contains(anchor) => None,
        Some(_) => Some(format!(
            "names #{anchor}, not a heading of {}",
            file.display()
        )),
        None if file.extension().is_some_and(|ext| ext == "md") => {
            let text = std::fs::read_to_string(root.join(&file)).ok()?;
            let anchors = read_page(&text).anchors;
            (!anchors.contains(anchor))
                .then(|| format!("names #{anchor}, not a heading of {}", file.display()))
        }
        None => Some(format!(
            "has an anchor into {}, which is not Markdown",
            file.display()
        )),
    }
}

#[test]
fn every_link_of_the_readme_and_the_docs_resolves_inside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = BTreeMap::new();
    for file in documents(root) {
        let text = std::fs::read_to_string(&file).expect("a readable Markdown file");
        let relative = file
            .strip_prefix(root)
            .expect("inside the root")
            .to_path_buf();
        pages.insert(relative, read_page(&text));
    }
    let mut problems = Vec::new();
    for (file, page) in &pages {
        for link in &page.links {
            if let Some(why) = broken(root, file, link, &pages) {
                problems.push(format!("{}: link `{link}` {why}", file.display()));
            }
        }
        for text in &page.bare_addresses {
            problems.push(format!(
                "{}: `{text}` is an address outside code, which a forge makes a link",
                file.display()
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "broken documentation links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_page_of_the_docs_is_in_the_books_summary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).expect("docs/SUMMARY.md");
    let listed: BTreeSet<PathBuf> = read_page(&summary)
        .links
        .iter()
        .map(PathBuf::from)
        .collect();
    let missing: Vec<String> = documents(root)
        .iter()
        .filter_map(|file| file.strip_prefix(root.join("docs")).ok())
        .filter(|page| *page != Path::new("SUMMARY.md") && !listed.contains(*page))
        .map(|page| page.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages the book would leave out: {missing:?}"
    );
}

#[test]
fn anchors_are_github_slugs_of_the_headings() {
    let page = read_page(
        "# Operating idem\n## `POST /v1/operations` — begin an operation (claim)\n\
         ## Tests, and how to run one\n## Notes\n## Notes\n",
    );
    let expected = [
        "operating-idem",
        "post-v1operations--begin-an-operation-claim",
        "tests-and-how-to-run-one",
        "notes",
        "notes-1",
    ];
    assert_eq!(
        page.anchors,
        expected.iter().map(|a| a.to_string()).collect()
    );
}

#[test]
fn links_that_leave_the_repository_are_refused() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pages = BTreeMap::new();
    let from = Path::new("docs/api.md");
    for link in [
        "https://example.org/",
        "http://127.0.0.1:3000/",
        "../../shared/API.md",
        "/etc",
    ] {
        assert!(broken(root, from, link, &pages).is_some(), "{link} passed");
    }
    assert!(broken(root, from, "concepts.md#leases", &pages).is_none());
    assert!(broken(root, from, "concepts.md#no-such-heading", &pages).is_some());
    assert!(broken(root, from, "../shared/API.md", &pages).is_some());
}
