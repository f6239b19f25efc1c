//! `#[derive(Row)]`: implements `pipeline::Row` (a stored table's name, its row doc
//! and its documented columns) from a struct. Use it through `pipeline`, which
//! re-exports it beside the trait:
//!
//! ```text
//! use pipeline::Row;
//! use serde::{Deserialize, Serialize};
//!
//! /// One agent tool call in a test game.
//! #[derive(Serialize, Deserialize, Row)]
//! #[row(table = "chess_calls", doc = "one agent tool call in a test game")]
//! pub struct CallCheckRow {
//!     /// The game.
//!     pub game_id: String,
//!     /// Ply number.
//!     pub ply: i64,
//!     /// Engine evaluation; null when unknown.
//!     pub eval: Option<i64>,
//!     /// Every ply as JSON.
//!     pub plies: serde_json::Value,
//! }
//! ```
//!
//! # Attributes
//!
//! * On the struct, required: `#[row(table = "...", doc = "...")]`: `Row::TABLE`
//!   (the file stem, `<table>.parquet`) and `Row::DOC` (what one row is: SCHEMA.md
//!   prints it as `One row = <doc>.`, so it is a phrase for a table's reader, not
//!   the struct's `///` comment, which describes the Rust type).
//! * On every field, required: a `///` doc comment (the `#[doc = "..."]` attributes
//!   it stands for), which is also the column's line in SCHEMA.md; a field without
//!   one is a compile error. Optional: `#[row(ty = Str | I64 | F64 | Bool | Json)]`
//!   (a `ColType` variant) where the type is not inferred. `#[row(doc = "...")]` on
//!   a field is an error: the doc is written once, as the `///` comment.
//!
//! # Column docs
//!
//! A column's doc is its field's `///` comment, lightly normalised so that it is one
//! line of a Markdown table: its first paragraph (up to the first blank line), each
//! line trimmed and the lines joined with single spaces, and an intra-doc link
//! written as `` [`name`] `` shown as `` `name` `` (a link with a target, `[text](url)`,
//! stays). Markdown is otherwise kept as written (code spans included); SCHEMA.md
//! escapes a `|`. The docs are not written into the Parquet files (a column there is
//! its name, type and nullability, plus `otb:json` metadata on JSON columns), so
//! rewording one changes SCHEMA.md and `stages/src/tables/row_schemas.md`, never a
//! stored table's bytes or a key.
//!
//! # Columns
//!
//! One column per field, in field order. Its name is the field's serialized name
//! (`#[serde(rename = "...")]` honoured). Its type is inferred from the field's type:
//! `String` / `str` -> `Str`; the integer types -> `I64` (a value beyond `i64` is an
//! error when the row is written); `f32` / `f64` -> `F64`;
//! `bool` -> `Bool`; `Value` (serde_json), `Vec<_>`, `BTreeMap` / `HashMap` -> `Json`;
//! `Option<T>` -> `T`'s type (every column is nullable). Any other type is a compile
//! error asking for `ty = ...`. So are serde attributes that would make the
//! serialized object differ from the columns (`rename_all`, `flatten`, `skip`,
//! `skip_serializing`), and two columns with one name.
//!
//! A proc-macro crate because a declarative macro cannot read field types and
//! attributes; its only dependencies are syn, quote and proc-macro2, which serde's
//! derive already brings into the build.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Data, DeriveInput, Fields, GenericArgument, LitStr, PathArguments, Type};

/// Derives `pipeline::Row`; see the crate docs for the attributes.
#[proc_macro_derive(Row, attributes(row))]
pub fn derive_row(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// The `ColType` variants, as written after `ty =`.
const COL_TYPES: [&str; 5] = ["Str", "I64", "F64", "Bool", "Json"];

fn expand(input: &DeriveInput) -> syn::Result<TokenStream> {
    let (table, doc) = struct_attrs(input)?;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Row)] works on structs with named fields",
        ));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Row)] works on structs with named fields",
        ));
    };
    let mut names: Vec<String> = Vec::new();
    let mut columns = Vec::new();
    for field in &fields.named {
        let column = field_column(field)?;
        if names.contains(&column.name) {
            return Err(syn::Error::new_spanned(
                field,
                format!("two columns are named `{}`", column.name),
            ));
        }
        let (name, ty, doc) = (&column.name, &column.ty, &column.doc);
        columns.push(quote! {
            ::pipeline::col(#name, ::pipeline::ColType::#ty, #doc)
        });
        names.push(column.name);
    }
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::pipeline::Row for #ident #ty_generics #where_clause {
            const TABLE: &'static str = #table;
            const DOC: &'static str = #doc;
            fn columns() -> &'static [::pipeline::Column] {
                const C: &[::pipeline::Column] = &[#(#columns),*];
                C
            }
        }
    })
}

/// `#[row(table = "...", doc = "...")]` of the struct; rejects `#[serde(rename_all)]`.
fn struct_attrs(input: &DeriveInput) -> syn::Result<(LitStr, LitStr)> {
    let (mut table, mut doc) = (None, None);
    for attr in &input.attrs {
        if attr.path().is_ident("row") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("table") {
                    table = Some(meta.value()?.parse::<LitStr>()?);
                } else if meta.path.is_ident("doc") {
                    doc = Some(meta.value()?.parse::<LitStr>()?);
                } else {
                    return Err(meta.error("expected `table = \"...\"` or `doc = \"...\"`"));
                }
                Ok(())
            })?;
        } else if attr.path().is_ident("serde") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("rename_all") {
                    return Err(meta.error(
                        "#[derive(Row)] names columns after fields: use #[serde(rename)] per field",
                    ));
                }
                skip_value(&meta)
            })?;
        }
    }
    let missing = |what: &str| {
        syn::Error::new_spanned(
            &input.ident,
            format!("#[derive(Row)] needs #[row({what} = \"...\")] on the struct"),
        )
    };
    Ok((
        table.ok_or_else(|| missing("table"))?,
        doc.ok_or_else(|| missing("doc"))?,
    ))
}

/// One field's column.
struct ColumnSpec {
    name: String,
    /// A `ColType` variant.
    ty: syn::Ident,
    doc: String,
}

fn field_column(field: &syn::Field) -> syn::Result<ColumnSpec> {
    let Some(ident) = &field.ident else {
        return Err(syn::Error::new_spanned(field, "a field without a name"));
    };
    let mut name = ident.to_string();
    let mut ty = None;
    for attr in &field.attrs {
        if attr.path().is_ident("row") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("doc") {
                    return Err(meta.error(
                        "a column's doc is the field's `///` comment: remove #[row(doc = ...)]",
                    ));
                } else if meta.path.is_ident("ty") {
                    let t: syn::Ident = meta.value()?.parse()?;
                    if !COL_TYPES.contains(&t.to_string().as_str()) {
                        return Err(syn::Error::new_spanned(
                            &t,
                            format!("expected one of {}", COL_TYPES.join(", ")),
                        ));
                    }
                    ty = Some(t);
                } else {
                    return Err(meta.error("expected `ty = ...`"));
                }
                Ok(())
            })?;
        } else if attr.path().is_ident("serde") {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("rename") && meta.input.peek(syn::Token![=]) {
                    name = meta.value()?.parse::<LitStr>()?.value();
                    return Ok(());
                }
                for bad in ["rename", "flatten", "skip", "skip_serializing"] {
                    if meta.path.is_ident(bad) {
                        return Err(meta.error(format!(
                            "#[serde({bad})] would make the row's object differ from its columns"
                        )));
                    }
                }
                skip_value(&meta)
            })?;
        }
    }
    let doc = column_doc(&field.attrs)?.ok_or_else(|| {
        syn::Error::new_spanned(
            ident,
            "a column needs a `///` doc comment (its line in SCHEMA.md)",
        )
    })?;
    let ty = match ty {
        Some(t) => t,
        None => match infer(&field.ty) {
            Some(t) => syn::Ident::new(t, Span::call_site()),
            None => {
                return Err(syn::Error::new_spanned(
                    &field.ty,
                    format!(
                        "cannot infer the column type: add #[row(ty = ...)] (one of {})",
                        COL_TYPES.join(", ")
                    ),
                ))
            }
        },
    };
    Ok(ColumnSpec { name, ty, doc })
}

/// The column doc of a field's `///` comment (its `#[doc = "..."]` attributes):
/// the first paragraph, lines trimmed and joined with single spaces, intra-doc
/// links `` [`name`] `` as `` `name` ``; `None` when there is no text.
fn column_doc(attrs: &[syn::Attribute]) -> syn::Result<Option<String>> {
    let mut text = String::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) = &nv.value
        else {
            return Err(syn::Error::new_spanned(
                &nv.value,
                "a column's doc must be a literal `///` comment",
            ));
        };
        text.push_str(&s.value());
        text.push('\n');
    }
    let mut words: Vec<&str> = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            if words.is_empty() {
                continue;
            }
            break;
        }
        words.push(line);
    }
    if words.is_empty() {
        return Ok(None);
    }
    Ok(Some(unlink(&words.join(" "))))
}

/// `` [`name`] `` (an intra-doc link without a target) as `` `name` ``.
fn unlink(doc: &str) -> String {
    let mut out = String::with_capacity(doc.len());
    let mut rest = doc;
    while let Some(at) = rest.find("[`") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let link = tail.find('`').and_then(|end| {
            let after = &tail[end + 1..];
            (after.starts_with(']') && !after[1..].starts_with(['(', '[']))
                .then_some((&tail[..end], &after[1..]))
        });
        match link {
            Some((name, after)) => {
                out.push('`');
                out.push_str(name);
                out.push('`');
                rest = after;
            }
            None => {
                out.push_str("[`");
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Consumes the value of a serde attribute this derive does not read
/// (`default`, `skip_serializing_if = "..."`, `with(...)`).
fn skip_value(meta: &syn::meta::ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let content;
        syn::parenthesized!(content in meta.input);
        content.parse::<TokenStream>()?;
    }
    Ok(())
}

/// The column type of a Rust type (by its last path segment), or `None`.
fn infer(ty: &Type) -> Option<&'static str> {
    match ty {
        Type::Reference(r) => infer(&r.elem),
        Type::Group(g) => infer(&g.elem),
        Type::Paren(p) => infer(&p.elem),
        Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last()?;
            let name = last.ident.to_string();
            Some(match name.as_str() {
                "Option" => return infer(single_arg(&last.arguments)?),
                "String" | "str" => "Str",
                "i8" | "i16" | "i32" | "i64" | "isize" | "u8" | "u16" | "u32" | "u64" | "usize" => {
                    "I64"
                }
                "f32" | "f64" => "F64",
                "bool" => "Bool",
                "Value" | "Vec" | "BTreeMap" | "HashMap" => "Json",
                _ => return None,
            })
        }
        _ => None,
    }
}

/// `T` of `Name<T>`.
fn single_arg(args: &PathArguments) -> Option<&Type> {
    let PathArguments::AngleBracketed(a) = args else {
        return None;
    };
    match a.args.first()? {
        GenericArgument::Type(t) if a.args.len() == 1 => Some(t),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::parse_quote;

    fn ty(t: Type) -> Option<&'static str> {
        infer(&t)
    }

    #[test]
    fn types_are_inferred_as_the_stored_tables_use_them() {
        assert_eq!(ty(parse_quote!(String)), Some("Str"));
        assert_eq!(ty(parse_quote!(&'static str)), Some("Str"));
        assert_eq!(ty(parse_quote!(i64)), Some("I64"));
        assert_eq!(ty(parse_quote!(usize)), Some("I64"));
        assert_eq!(ty(parse_quote!(f64)), Some("F64"));
        assert_eq!(ty(parse_quote!(bool)), Some("Bool"));
        assert_eq!(ty(parse_quote!(serde_json::Value)), Some("Json"));
        assert_eq!(ty(parse_quote!(Vec<CallRecord>)), Some("Json"));
        assert_eq!(ty(parse_quote!(Option<f64>)), Some("F64"));
        assert_eq!(ty(parse_quote!(std::option::Option<String>)), Some("Str"));
        assert_eq!(ty(parse_quote!(Option<Vec<i64>>)), Some("Json"));
        assert_eq!(ty(parse_quote!(Digest)), None);
        assert_eq!(ty(parse_quote!(Option<Digest>)), None);
        assert_eq!(ty(parse_quote!((i64, i64))), None);
    }

    fn expanded(input: DeriveInput) -> String {
        expand(&input).unwrap().to_string()
    }

    fn error(input: DeriveInput) -> String {
        expand(&input).unwrap_err().to_string()
    }

    #[test]
    fn columns_follow_fields_with_renames_and_explicit_types() {
        let out = expanded(parse_quote! {
            #[derive(Serialize)]
            #[row(table = "t", doc = "one row")]
            #[serde(deny_unknown_fields)]
            struct T {
                /// The `a` count; null
                ///   when unknown.
                ///
                /// Not in the column doc.
                #[serde(default, skip_serializing_if = "Option::is_none")]
                a: Option<i64>,
                #[serde(rename = "bee")]
                /// A [`Digest`], see [`Digest`](crate::Digest) and [the spec][spec].
                #[row(ty = Json)]
                b: Digest,
            }
        });
        let want = quote! {
            impl ::pipeline::Row for T {
                const TABLE: &'static str = "t";
                const DOC: &'static str = "one row";
                fn columns() -> &'static [::pipeline::Column] {
                    const C: &[::pipeline::Column] = &[
                        ::pipeline::col("a", ::pipeline::ColType::I64, "The `a` count; null when unknown."),
                        ::pipeline::col(
                            "bee",
                            ::pipeline::ColType::Json,
                            "A `Digest`, see [`Digest`](crate::Digest) and [the spec][spec]."
                        )
                    ];
                    C
                }
            }
        };
        assert_eq!(out, want.to_string());
    }

    #[test]
    fn intra_doc_links_lose_their_brackets_and_nothing_else_does() {
        assert_eq!(
            unlink("the id ([`tool_set_id`])."),
            "the id (`tool_set_id`)."
        );
        assert_eq!(unlink("[`A`] or [`B`]"), "`A` or `B`");
        assert_eq!(unlink("`[{docid, url}]`"), "`[{docid, url}]`");
        assert_eq!(unlink("[`x`](y) [`x`][y] [`x"), "[`x`](y) [`x`][y] [`x");
    }

    #[test]
    fn what_cannot_be_a_column_is_a_compile_error() {
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = "x"] x: Digest }
        });
        assert!(e.contains("cannot infer the column type"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { x: i64 }
        });
        assert!(e.contains("needs a `///` doc comment"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = ""] #[doc = "   "] #[doc = ""] x: i64 }
        });
        assert!(e.contains("needs a `///` doc comment"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = "x"] #[row(doc = "x")] x: i64 }
        });
        assert!(e.contains("remove #[row(doc"), "{e}");
        let e = error(parse_quote! {
            #[row(doc = "d")]
            struct T { #[doc = "x"] x: i64 }
        });
        assert!(e.contains("#[row(table"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t")]
            struct T { #[doc = "x"] x: i64 }
        });
        assert!(e.contains("#[row(doc"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = "x"] #[row(ty = Text)] x: i64 }
        });
        assert!(e.contains("expected one of Str"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            #[serde(rename_all = "camelCase")]
            struct T { #[doc = "x"] x: i64 }
        });
        assert!(e.contains("per field"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = "x"] #[serde(skip)] x: i64 }
        });
        assert!(e.contains("serde(skip)"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T { #[doc = "x"] x: i64, #[serde(rename = "x")] #[doc = "y"] y: i64 }
        });
        assert!(e.contains("two columns are named `x`"), "{e}");
        let e = error(parse_quote! {
            #[row(table = "t", doc = "d")]
            struct T(i64);
        });
        assert!(e.contains("named fields"), "{e}");
    }
}
