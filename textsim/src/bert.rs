//! The BERT encoder that sentence embeddings run on, in plain Rust: f32 weights read
//! from a `model.safetensors` file, row-major matrices, the matrix products in
//! `matrixmultiply`'s `sgemm` (kernels chosen at run time for the CPU: AVX, FMA).
//!
//! Several texts go through one forward pass stacked row after row, without padding:
//! the dense layers multiply all their rows at once, attention stays within a text, so a
//! text's vector does not depend on which other texts are embedded with it. The layers are those of Hugging Face's
//! `BertModel` (absolute position embeddings, post-layer-norm, GELU with `erf`), which
//! is what all-MiniLM-L6-v2 is; the pooler is not used (sentence-transformers pools
//! the last hidden states itself).

use std::collections::HashMap;

use serde_json::Value;

/// The shape of the encoder (the fields of a Hugging Face BERT `config.json` it uses).
#[derive(Debug, Clone, PartialEq)]
pub struct BertConfig {
    /// Word-piece vocabulary size.
    pub vocab_size: usize,
    /// Width of every token state.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads per layer (dividing `hidden_size`).
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// Positions the position embeddings cover (the longest input).
    pub max_position_embeddings: usize,
    /// Token types (segment ids); every input here is type 0.
    pub type_vocab_size: usize,
    /// Epsilon of the layer norms.
    pub layer_norm_eps: f32,
    /// The feed-forward activation.
    pub act: Activation,
}

/// The feed-forward activation of [`BertConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `hidden_act: "gelu"`: `x * (1 + erf(x / sqrt 2)) / 2`.
    Gelu,
    /// `hidden_act: "gelu_new"` or `"gelu_pytorch_tanh"`: the tanh approximation.
    GeluTanh,
    /// `hidden_act: "relu"`.
    Relu,
}

impl BertConfig {
    /// Reads a `config.json`; a missing size or an unsupported variant is an error
    /// (its text says which field).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let size = |k: &str| -> Result<usize, String> {
            v.get(k)
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| format!("`{k}` is missing or not a positive integer"))
        };
        let act = match v.get("hidden_act").and_then(Value::as_str) {
            Some("gelu") => Activation::Gelu,
            Some("gelu_new" | "gelu_pytorch_tanh") => Activation::GeluTanh,
            Some("relu") => Activation::Relu,
            other => return Err(format!("`hidden_act` {other:?} is not supported")),
        };
        match v.get("position_embedding_type").and_then(Value::as_str) {
            None | Some("absolute") => {}
            Some(other) => {
                return Err(format!(
                    "`position_embedding_type` {other} is not supported"
                ))
            }
        }
        let cfg = BertConfig {
            vocab_size: size("vocab_size")?,
            hidden_size: size("hidden_size")?,
            num_hidden_layers: size("num_hidden_layers")?,
            num_attention_heads: size("num_attention_heads")?,
            intermediate_size: size("intermediate_size")?,
            max_position_embeddings: size("max_position_embeddings")?,
            type_vocab_size: size("type_vocab_size")?,
            layer_norm_eps: v
                .get("layer_norm_eps")
                .and_then(Value::as_f64)
                .unwrap_or(1e-12) as f32,
            act,
        };
        if !cfg.hidden_size.is_multiple_of(cfg.num_attention_heads) {
            return Err(format!(
                "`hidden_size` {} is not a multiple of `num_attention_heads` {}",
                cfg.hidden_size, cfg.num_attention_heads
            ));
        }
        Ok(cfg)
    }
}

/// `y = x W^T + b` with `W` stored as PyTorch does (`[out, in]`, row-major).
struct Linear {
    w: Vec<f32>,
    b: Vec<f32>,
    n_in: usize,
    n_out: usize,
}

struct LayerNorm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
    eps: f32,
}

struct Layer {
    /// Query, key and value in one product: `[3 * hidden, hidden]`.
    qkv: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    up: Linear,
    down: Linear,
    out_norm: LayerNorm,
}

/// A loaded encoder.
pub struct Bert {
    cfg: BertConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert").field("cfg", &self.cfg).finish()
    }
}

/// The tensors of a safetensors file (f32 only), by name.
struct Tensors<'a> {
    data: &'a [u8],
    entries: HashMap<String, (Vec<usize>, usize, usize)>,
    prefix: &'static str,
}

impl<'a> Tensors<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        let head_len = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .ok_or("shorter than a safetensors header")?;
        let head_end = usize::try_from(head_len)
            .ok()
            .and_then(|n| n.checked_add(8))
            .filter(|&end| end <= bytes.len())
            .ok_or("the header's length runs past the end of the file")?;
        let head: HashMap<String, Value> =
            serde_json::from_slice(&bytes[8..head_end]).map_err(|e| format!("header: {e}"))?;
        let data = &bytes[head_end..];
        let mut entries = HashMap::new();
        for (name, meta) in head {
            if name == "__metadata__" {
                continue;
            }
            let dtype = meta.get("dtype").and_then(Value::as_str).unwrap_or("");
            let shape: Option<Vec<usize>> = meta
                .get("shape")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect());
            let offsets: Option<Vec<usize>> = meta
                .get("data_offsets")
                .and_then(Value::as_array)
                .and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect());
            let (Some(shape), Some([start, end])) = (shape, offsets.as_deref()) else {
                return Err(format!("tensor {name}: no shape or data offsets"));
            };
            if *start > *end || *end > data.len() {
                return Err(format!("tensor {name}: data offsets out of the file"));
            }
            // Tensors that are not f32 (position ids) are never read.
            if dtype == "F32" {
                entries.insert(name, (shape, *start, *end));
            }
        }
        let prefix = if entries.contains_key("embeddings.word_embeddings.weight") {
            ""
        } else {
            "bert."
        };
        Ok(Tensors {
            data,
            entries,
            prefix,
        })
    }

    /// The f32 tensor `name` (under the file's prefix), which must have `shape`.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, String> {
        let full = format!("{}{name}", self.prefix);
        let (got, start, end) = self
            .entries
            .get(&full)
            .ok_or_else(|| format!("no f32 tensor {full}"))?;
        if got != shape {
            return Err(format!(
                "tensor {full} has shape {got:?}, expected {shape:?}"
            ));
        }
        let n: usize = shape.iter().product();
        if end - start != n * 4 {
            return Err(format!(
                "tensor {full}: {} bytes for {n} values",
                end - start
            ));
        }
        // One copy of the little-endian bytes (a per-value conversion took half a
        // second for this model in the unoptimised test build).
        let mut values = vec![0f32; n];
        bytemuck::cast_slice_mut::<f32, u8>(&mut values).copy_from_slice(&self.data[*start..*end]);
        if cfg!(target_endian = "big") {
            for v in &mut values {
                *v = f32::from_bits(u32::from_le(v.to_bits()));
            }
        }
        Ok(values)
    }

    fn linear(&self, name: &str, n_out: usize, n_in: usize) -> Result<Linear, String> {
        Ok(Linear {
            w: self.get(&format!("{name}.weight"), &[n_out, n_in])?,
            b: self.get(&format!("{name}.bias"), &[n_out])?,
            n_in,
            n_out,
        })
    }

    fn norm(&self, name: &str, n: usize, eps: f32) -> Result<LayerNorm, String> {
        Ok(LayerNorm {
            gamma: self.get(&format!("{name}.weight"), &[n])?,
            beta: self.get(&format!("{name}.bias"), &[n])?,
            eps,
        })
    }
}

impl Bert {
    /// Reads the encoder's weights from the bytes of a safetensors file (names with
    /// or without a `bert.` prefix); an error names the tensor that is missing or
    /// has the wrong shape.
    pub fn load(cfg: BertConfig, safetensors: &[u8]) -> Result<Self, String> {
        let t = Tensors::parse(safetensors)?;
        let (h, eps) = (cfg.hidden_size, cfg.layer_norm_eps);
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let q = t.linear(&format!("{p}.attention.self.query"), h, h)?;
            let k = t.linear(&format!("{p}.attention.self.key"), h, h)?;
            let v = t.linear(&format!("{p}.attention.self.value"), h, h)?;
            let qkv = Linear {
                w: [q.w, k.w, v.w].concat(),
                b: [q.b, k.b, v.b].concat(),
                n_in: h,
                n_out: 3 * h,
            };
            layers.push(Layer {
                qkv,
                attn_out: t.linear(&format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: t.norm(&format!("{p}.attention.output.LayerNorm"), h, eps)?,
                up: t.linear(&format!("{p}.intermediate.dense"), cfg.intermediate_size, h)?,
                down: t.linear(&format!("{p}.output.dense"), h, cfg.intermediate_size)?,
                out_norm: t.norm(&format!("{p}.output.LayerNorm"), h, eps)?,
            });
        }
        Ok(Bert {
            word: t.get("embeddings.word_embeddings.weight", &[cfg.vocab_size, h])?,
            position: t.get(
                "embeddings.position_embeddings.weight",
                &[cfg.max_position_embeddings, h],
            )?,
            token_type: t.get(
                "embeddings.token_type_embeddings.weight",
                &[cfg.type_vocab_size, h],
            )?,
            emb_norm: t.norm("embeddings.LayerNorm", h, eps)?,
            layers,
            cfg,
        })
    }

    /// The configuration the encoder was loaded with.
    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }

    /// The last hidden states of several sequences of word-piece ids (token type 0,
    /// every position of a sequence attended, no sequence seeing another): the rows of
    /// all sequences one after another, `hidden_size` each, row-major. The sequences
    /// share the matrix products of the dense layers (one product over all their rows
    /// instead of one per sequence: the weights are packed once), and a row's result
    /// does not depend on the other sequences (a test checks it bit for bit). An id
    /// outside the vocabulary or a sequence longer than the position embeddings is an
    /// error.
    pub fn forward(&self, seqs: &[&[u32]]) -> Result<Vec<f32>, String> {
        let h = self.cfg.hidden_size;
        let rows: usize = seqs.iter().map(|s| s.len()).sum();
        let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
        if longest > self.cfg.max_position_embeddings {
            return Err(format!(
                "{longest} tokens, more than the model's {} positions",
                self.cfg.max_position_embeddings
            ));
        }
        let mut x = vec![0f32; rows * h];
        // Each row: its word, its position within its own sequence, token type 0.
        let positions = seqs.iter().flat_map(|s| s.iter().enumerate());
        for (row, (i, &id)) in x.chunks_exact_mut(h).zip(positions) {
            let id = id as usize;
            if id >= self.cfg.vocab_size {
                return Err(format!("token id {id} is outside the vocabulary"));
            }
            let word = &self.word[id * h..(id + 1) * h];
            let pos = &self.position[i * h..(i + 1) * h];
            for (j, out) in row.iter_mut().enumerate() {
                *out = word[j] + self.token_type[j] + pos[j];
            }
        }
        self.emb_norm.apply(&mut x, h);
        let heads = self.cfg.num_attention_heads;
        let dh = h / heads;
        let scale = (dh as f32).sqrt();
        let mut qkv = vec![0f32; rows * 3 * h];
        let mut scores = vec![0f32; longest * longest];
        let mut ctx = vec![0f32; rows * h];
        let mut attn = vec![0f32; rows * h];
        let mut up = vec![0f32; rows * self.cfg.intermediate_size];
        let mut down = vec![0f32; rows * h];
        for layer in &self.layers {
            layer.qkv.apply(&x, rows, &mut qkv);
            let mut start = 0;
            for seq in seqs {
                let t = seq.len();
                let (qkv, ctx) = (&qkv[start * 3 * h..], &mut ctx[start * h..]);
                start += t;
                if t == 0 {
                    continue;
                }
                let scores = &mut scores[..t * t];
                for head in 0..heads {
                    let q = &qkv[head * dh..];
                    let k = &qkv[h + head * dh..];
                    let v = &qkv[2 * h + head * dh..];
                    // scores = q k^T: q is [t, dh] with rows 3h apart, k^T is [dh, t].
                    gemm(t, dh, t, (q, 3 * h, 1), (k, 1, 3 * h), (scores, t), 0.0);
                    for row in scores.chunks_exact_mut(t) {
                        row.iter_mut().for_each(|s| *s /= scale);
                        softmax(row);
                    }
                    // ctx[:, head] = scores v: v is [t, dh] with rows 3h apart.
                    gemm(
                        t,
                        t,
                        dh,
                        (scores, t, 1),
                        (v, 3 * h, 1),
                        (&mut ctx[head * dh..], h),
                        0.0,
                    );
                }
            }
            layer.attn_out.apply(&ctx, rows, &mut attn);
            attn.iter_mut().zip(&x).for_each(|(a, r)| *a += r);
            layer.attn_norm.apply(&mut attn, h);
            layer.up.apply(&attn, rows, &mut up);
            match self.cfg.act {
                Activation::Gelu => up.iter_mut().for_each(|u| *u = gelu_erf(*u)),
                Activation::GeluTanh => up.iter_mut().for_each(|u| *u = gelu_tanh(*u)),
                Activation::Relu => up.iter_mut().for_each(|u| *u = u.max(0.0)),
            }
            layer.down.apply(&up, rows, &mut down);
            down.iter_mut().zip(&attn).for_each(|(d, r)| *d += r);
            layer.out_norm.apply(&mut down, h);
            std::mem::swap(&mut x, &mut down);
        }
        Ok(x)
    }
}

impl Linear {
    /// `out[t, n_out] = x[t, n_in] W^T + b`.
    fn apply(&self, x: &[f32], t: usize, out: &mut [f32]) {
        for row in out.chunks_exact_mut(self.n_out).take(t) {
            row.copy_from_slice(&self.b);
        }
        // W^T as a [n_in, n_out] matrix: element (i, o) is w[o * n_in + i].
        gemm(
            t,
            self.n_in,
            self.n_out,
            (x, self.n_in, 1),
            (&self.w, 1, self.n_in),
            (out, self.n_out),
            1.0,
        );
    }
}

impl LayerNorm {
    /// Normalises each row of `x` (rows of `n`) in place; mean and variance in f64.
    fn apply(&self, x: &mut [f32], n: usize) {
        for row in x.chunks_exact_mut(n) {
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n as f64;
            let var = row
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / n as f64;
            let inv = 1.0 / (var + f64::from(self.eps)).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.gamma).zip(&self.beta) {
                *v = ((f64::from(*v) - mean) * inv) as f32 * g + b;
            }
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for s in row.iter_mut() {
        *s = (*s - max).exp();
        sum += *s;
    }
    row.iter_mut().for_each(|s| *s /= sum);
}

fn gelu_erf(x: f32) -> f32 {
    0.5 * x * (1.0 + libm::erff(x * std::f32::consts::FRAC_1_SQRT_2))
}

fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh())
}

/// `C = A B + beta C` for an `m x k` matrix A and a `k x n` matrix B, each given as
/// (slice, row stride, column stride), and C as (slice, row stride) with unit column
/// stride. Panics (a bug here, never input) when a matrix does not fit its slice.
fn gemm(
    m: usize,
    k: usize,
    n: usize,
    a: (&[f32], usize, usize),
    b: (&[f32], usize, usize),
    c: (&mut [f32], usize),
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    let last = |rows: usize, cols: usize, rs: usize, cs: usize| (rows - 1) * rs + (cols - 1) * cs;
    if k > 0 {
        assert!(last(m, k, a.1, a.2) < a.0.len(), "A does not fit its slice");
        assert!(last(k, n, b.1, b.2) < b.0.len(), "B does not fit its slice");
    }
    assert!(last(m, n, c.1, 1) < c.0.len(), "C does not fit its slice");
    let s = |x: usize| x as isize;
    // SAFETY: the asserts above keep every element that sgemm reads (A, B) or writes
    // (C) inside its slice; C is borrowed mutably, so it overlaps neither A nor B.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.0.as_ptr(),
            s(a.1),
            s(a.2),
            b.0.as_ptr(),
            s(b.1),
            s(b.2),
            beta,
            c.0.as_mut_ptr(),
            s(c.1),
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_multiplies_strided_views() {
        // A = [[1, 2], [3, 4]] read transposed from a row-major buffer.
        let a = [1.0, 3.0, 2.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [1.0; 4];
        gemm(2, 2, 2, (&a, 1, 2), (&b, 2, 1), (&mut c, 2), 1.0);
        assert_eq!(c, [1.0 + 19.0, 1.0 + 22.0, 1.0 + 43.0, 1.0 + 50.0]);
    }

    #[test]
    fn softmax_and_gelu_match_their_definitions() {
        let mut r = [0.0, 0.0, f32::ln(2.0)];
        softmax(&mut r);
        for (got, want) in r.iter().zip([0.25, 0.25, 0.5]) {
            assert!((got - want).abs() < 1e-7, "{r:?}");
        }
        assert_eq!(gelu_erf(0.0), 0.0);
        // torch.nn.functional.gelu(torch.tensor([1.0, -1.0])) = [0.8413447, -0.1586553]
        assert!((gelu_erf(1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((gelu_erf(-1.0) + 0.158_655_3).abs() < 1e-6);
    }

    #[test]
    fn config_refuses_what_the_encoder_does_not_implement() {
        let ok = br#"{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 8,
            "max_position_embeddings": 16, "type_vocab_size": 2, "hidden_act": "gelu"}"#;
        let cfg = BertConfig::from_json(ok).unwrap();
        assert_eq!(cfg.layer_norm_eps, 1e-12);
        let bad = String::from_utf8_lossy(ok).replace("\"gelu\"", "\"swish\"");
        let e = BertConfig::from_json(bad.as_bytes()).unwrap_err();
        assert!(e.contains("hidden_act"), "{e}");
        let bad = String::from_utf8_lossy(ok)
            .replace("\"num_attention_heads\": 2", "\"num_attention_heads\": 3");
        assert!(BertConfig::from_json(bad.as_bytes())
            .unwrap_err()
            .contains("multiple"));
        let bad = String::from_utf8_lossy(ok).replace("\"hidden_size\": 4,", "");
        assert!(BertConfig::from_json(bad.as_bytes())
            .unwrap_err()
            .contains("hidden_size"));
    }

    #[test]
    fn a_truncated_or_foreign_weights_file_is_an_error() {
        let cfg = BertConfig::from_json(
            br#"{"vocab_size": 10, "hidden_size": 4, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 8,
            "max_position_embeddings": 16, "type_vocab_size": 2, "hidden_act": "gelu"}"#,
        )
        .unwrap();
        assert!(Bert::load(cfg.clone(), b"abc")
            .unwrap_err()
            .contains("header"));
        let mut file = 1000u64.to_le_bytes().to_vec();
        file.extend_from_slice(b"{}");
        assert!(Bert::load(cfg.clone(), &file)
            .unwrap_err()
            .contains("past the end"));
        let head = br#"{"embeddings.word_embeddings.weight": {"dtype": "F32", "shape": [10, 4], "data_offsets": [0, 160]}}"#;
        let mut file = (head.len() as u64).to_le_bytes().to_vec();
        file.extend_from_slice(head);
        file.extend_from_slice(&[0u8; 160]);
        let e = Bert::load(cfg, &file).unwrap_err();
        assert!(
            e.contains("encoder.layer.0.attention.self.query.weight"),
            "{e}"
        );
    }
}
