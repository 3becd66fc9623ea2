"""Which parameters are attention projections blocked by heads, and how many.

DeepSpeed's `per_head_muon` runs Muon's Newton-Schulz iteration on each
head's block of rows of a query, key or value projection apart from the
others. Whether a matrix is such a projection, and into how many heads its
rows split, is a fact of the model: DeepSpeed 0.19 reads it from the
parameter's module name and the model's config, and confirms it against the
shape. The exporter records it on the parameter's `ds.variable` as
`ds.attention_heads`; dsc uses it only when the config asks for per-head
Muon.

The rules follow DeepSpeed's `set_optimizer_flags`:
- the leaf module name (`q_proj` in `model.layers.0.self_attn.q_proj.weight`)
  says what the matrix claims to be; fused QKV matrices (GPT-2's `c_attn`)
  and MLA's down-projections do not split into uniform heads;
- the config gives the candidate (heads, width) pairs: queries take the
  attention heads, keys and values the key-value heads (grouped-query
  attention), each `head_dim` wide (hidden_size / heads when unset); MLA's
  up-projections take qk_nope_head_dim + qk_rope_head_dim or + v_head_dim;
- a candidate counts only when heads x width is exactly the row count, and
  candidates that disagree leave the matrix whole.
"""

_FUSED = ("qkv_proj", "query_key_value", "c_attn", "in_proj_qkv", "wqkv",
          "q_a_proj", "kv_a_proj", "kv_a_proj_with_mqa")
_MLA_QUERY = ("q_b_proj",)
_MLA_KEY_VALUE = ("kv_b_proj",)
_KEY_VALUE = ("k_proj", "key", "wk", "v_proj", "value", "wv")
_QUERY = ("q_proj", "query", "wq")

_HEAD_COUNTS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")
_KV_HEAD_COUNTS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "n_head_kv")


def _kind(leaf):
    """What the leaf name claims the matrix is, or None for no claim."""
    for kind, names in (("fused", _FUSED), ("mla_query", _MLA_QUERY),
                        ("mla_key_value", _MLA_KEY_VALUE), ("key_value", _KEY_VALUE),
                        ("query", _QUERY)):
        if any(leaf.startswith(n) for n in names):
            return kind
    return None


def _positive(config, names):
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
    return None


def _candidates(kind, config):
    """The (heads, width) pairs a matrix of this kind may have."""
    heads = _positive(config, _HEAD_COUNTS)
    if heads is None:
        return []
    kv_heads = _positive(config, _KV_HEAD_COUNTS) or heads
    head_dim = _positive(config, ("head_dim",))
    hidden = _positive(config, ("hidden_size", "n_embd", "d_model"))
    if head_dim is None and hidden is not None and hidden % heads == 0:
        head_dim = hidden // heads
    nope = _positive(config, ("qk_nope_head_dim",))
    rope = _positive(config, ("qk_rope_head_dim",))
    v_dim = _positive(config, ("v_head_dim",))
    out = []
    if kind in ("query", "mla_query") and nope and rope:
        out.append((heads, nope + rope))
    if kind == "mla_key_value" and nope and v_dim:
        out.append((heads, nope + v_dim))
    if kind == "query" and head_dim:
        out.append((heads, head_dim))
    if kind == "key_value" and head_dim:
        out.append((kv_heads, head_dim))
    return out


def attention_heads(module, names_and_shapes):
    """{parameter name: heads} for the attention projections among
    `names_and_shapes` ((name, shape) pairs) that split into heads."""
    config = getattr(module, "config", None)
    if config is None:
        return {}
    config = getattr(config, "text_config", None) or config
    found = {}
    for name, shape in names_and_shapes:
        parts = name.split(".")
        if len(shape) != 2 or len(parts) < 2:
            continue
        kind = _kind(parts[-2].lower())
        if kind in (None, "fused"):
            continue
        exact = {h for h, w in _candidates(kind, config) if h * w == shape[0]}
        if len(exact) == 1:
            found[name] = exact.pop()
    return found
