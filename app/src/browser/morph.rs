//! Turns the document's body into a freshly rendered one in place, touching only what
//! differs.
//!
//! Children are paired by element name and key (`data-morph-key` or `id`; an island's
//! component); an island is kept as it is (its DOM belongs to its code) when its component
//! and props are unchanged, and replaced otherwise. Form fields keep what was typed: only
//! attributes change, never a field's live value. A node is moved only when the order
//! changed: moving a node blurs the field inside it that has the focus.

use std::collections::HashSet;
use wasm_bindgen::JsCast;
use web_sys::{Element, Node};

const ISLAND: &str = "LEPTOS-ISLAND";

/// The attribute that names a list's item (a row's operation id, say) across renderings. Its
/// own name, so that no attribute meant for something else pairs two different items.
const KEY: &str = "data-morph-key";

/// Makes `old_parent`'s children those of `new_parent` (a node of another document; nodes
/// taken from it are adopted by the DOM).
pub fn morph_children(old_parent: &Node, new_parent: &Node) {
    let new_children = children(new_parent);
    let new_keys: HashSet<(String, String)> = new_children
        .iter()
        .filter_map(|node| node.dyn_ref::<Element>().and_then(keyed))
        .collect();
    let mut cursor = old_parent.first_child();
    for new in new_children {
        // Keyed nodes that are gone go first: were the next ones moved up over them instead,
        // the field being typed in one of those would lose the focus.
        while let Some(gone) = cursor.clone().filter(|node| is_gone(node, &new_keys)) {
            cursor = gone.next_sibling();
            let _ = old_parent.remove_child(&gone);
        }
        match find_match(cursor.clone(), &new) {
            Some(old) => {
                if cursor.as_ref().is_some_and(|c| c.is_same_node(Some(&old))) {
                    cursor = old.next_sibling();
                } else {
                    let _ = old_parent.insert_before(&old, cursor.as_ref());
                }
                morph(&old, &new);
            }
            None => {
                let _ = old_parent.insert_before(&new, cursor.as_ref());
            }
        }
    }
    while let Some(node) = cursor {
        cursor = node.next_sibling();
        let _ = old_parent.remove_child(&node);
    }
}

fn morph(old: &Node, new: &Node) {
    match (old.dyn_ref::<Element>(), new.dyn_ref::<Element>()) {
        (Some(old), Some(new)) => morph_element(old, new),
        _ => {
            if old.node_value() != new.node_value() {
                old.set_node_value(new.node_value().as_deref());
            }
        }
    }
}

fn morph_element(old: &Element, new: &Element) {
    if old.tag_name() == ISLAND {
        if !same_island(old, new) {
            let _ = old.replace_with_with_node_1(new);
        }
        return;
    }
    sync_attributes(old, new);
    morph_children(old, new);
}

fn same_island(old: &Element, new: &Element) -> bool {
    ["data-component", "data-props"]
        .iter()
        .all(|name| old.get_attribute(name) == new.get_attribute(name))
}

fn sync_attributes(old: &Element, new: &Element) {
    let new_attributes = new.attributes();
    for index in 0..new_attributes.length() {
        if let Some(attribute) = new_attributes.item(index) {
            let (name, value) = (attribute.name(), attribute.value());
            if old.get_attribute(&name).as_deref() != Some(value.as_str()) {
                let _ = old.set_attribute(&name, &value);
            }
        }
    }
    let old_attributes = old.attributes();
    let stale: Vec<String> = (0..old_attributes.length())
        .filter_map(|index| old_attributes.item(index))
        .map(|attribute| attribute.name())
        .filter(|name| !new.has_attribute(name))
        .collect();
    for name in stale {
        let _ = old.remove_attribute(&name);
    }
}

/// The first node from `start` on that can become `new`: for an element, one with the same
/// name and key; for text or a comment, only the node at `start` itself.
fn find_match(start: Option<Node>, new: &Node) -> Option<Node> {
    let Some(new_element) = new.dyn_ref::<Element>() else {
        return start.filter(|node| node.node_type() == new.node_type());
    };
    let (name, wanted) = (new_element.tag_name(), key(new_element));
    let mut candidate = start;
    while let Some(node) = candidate {
        if let Some(element) = node.dyn_ref::<Element>() {
            if element.tag_name() == name && key(element) == wanted {
                return Some(node);
            }
        }
        candidate = node.next_sibling();
    }
    None
}

/// What pairs `element` with its next rendering among its siblings: its [`KEY`] or `id`; for
/// an island without either, its component, so that an island whose sibling left is not
/// taken for that sibling (and replaced, losing its state) but kept.
fn key(element: &Element) -> Option<String> {
    element
        .get_attribute(KEY)
        .or_else(|| element.get_attribute("id"))
        .or_else(|| {
            (element.tag_name() == ISLAND)
                .then(|| element.get_attribute("data-component"))
                .flatten()
        })
}

/// An element's name and key, if it has a key.
fn keyed(element: &Element) -> Option<(String, String)> {
    key(element).map(|key| (element.tag_name(), key))
}

/// Whether `node` is a keyed element whose key the new children no longer have.
fn is_gone(node: &Node, new_keys: &HashSet<(String, String)>) -> bool {
    node.dyn_ref::<Element>()
        .and_then(keyed)
        .is_some_and(|name_and_key| !new_keys.contains(&name_and_key))
}

fn children(parent: &Node) -> Vec<Node> {
    let list = parent.child_nodes();
    (0..list.length())
        .filter_map(|index| list.item(index))
        .collect()
}

/// The islands in the document now.
pub fn islands() -> Vec<Element> {
    let Some(document) = web_sys::window().and_then(|window| window.document()) else {
        return Vec::new();
    };
    let Ok(found) = document.query_selector_all("leptos-island") else {
        return Vec::new();
    };
    (0..found.length())
        .filter_map(|index| found.item(index))
        .filter_map(|node| node.dyn_into::<Element>().ok())
        .collect()
}
