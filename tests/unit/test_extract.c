/*
 * test_extract.c — unit tests of candidate extraction (src/extract/extract.c):
 * the selection rules case by case, error wording, normalisation, bounds on
 * time for pathological input, and a seeded mutation property test.
 */
#include "kgym/extract.h"
#include "kg_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define MODEL                                                                      \
    "import torch\n"                                                               \
    "import torch.nn as nn\n"                                                      \
    "import triton\n"                                                              \
    "import triton.language as tl\n"                                               \
    "\n"                                                                           \
    "@triton.jit\n"                                                                \
    "def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"                     \
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"                   \
    "    x = tl.load(x_ptr + offs, mask=offs < n)\n"                               \
    "    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=offs < n)\n"              \
    "\n"                                                                           \
    "class ModelNew(nn.Module):\n"                                                 \
    "    def forward(self, x):\n"                                                  \
    "        y = torch.empty_like(x)\n"                                            \
    "        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)\n" \
    "        return y\n"

static kg_extract_result R;
static kg_error E;

/* Runs the extractor on a C string; the previous result is freed first. */
static int ex(const char *s)
{
    kg_extract_result_free(&R);
    memset(&E, 0, sizeof E);
    return kg_extract_candidate(s, strlen(s), &R, &E);
}

static int ex_n(const char *s, size_t n)
{
    kg_extract_result_free(&R);
    memset(&E, 0, sizeof E);
    return kg_extract_candidate(s, n, &R, &E);
}

static int has(const char *hay, const char *needle) { return hay && strstr(hay, needle) != NULL; }

static void test_single_block_tagged(void)
{
    KG_CHECK(ex("Here is the kernel:\n\n```python\n" MODEL "```\n\nThis fuses the ReLU.\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.code_len == strlen(MODEL));
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
    KG_CHECK(R.blocks_found == 1);
    KG_CHECK(R.block_index == 0);
    KG_CHECK(has(R.detail, "```python block (1 of 1) defining ModelNew"));
}

static void test_single_block_untagged(void)
{
    KG_CHECK(ex("```\n" MODEL "```") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
    KG_CHECK(has(R.detail, "untagged ``` block"));
}

static void test_python_tag_variants(void)
{
    static const char *const tags[] = {"py", "Python3", "python3.11", "PYTHON", "{.python}",
                                       "triton", "python title=\"k.py\""};
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        char buf[2048];
        snprintf(buf, sizeof buf, "```%s\n%s```\n", tags[i], MODEL);
        KG_CHECK(ex(buf) == KG_OK);
        KG_CHECK_STR(R.code, MODEL);
    }
    /* Not Python: never taken, even though it defines ModelNew. */
    static const char *const other[] = {"pythonic", "text", "cuda", "c++", "bash"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char buf[2048];
        snprintf(buf, sizeof buf, "```%s\n%s```\n", other[i], MODEL);
        KG_CHECK(ex(buf) == KG_ERR_INVALID);
    }
}

static void test_last_block_defining_modelnew(void)
{
    const char *text = "First attempt:\n```python\nimport torch\nclass ModelNew(nn.Module):\n    pass\n```\n"
                       "Better:\n```python\n" MODEL "```\n"
                       "Usage:\n```python\nm = ModelNew()\nprint(m(torch.randn(4)))\n```\n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.blocks_found == 3);
    KG_CHECK(R.block_index == 1);
    KG_CHECK(has(R.detail, "last ```python block (2 of 3) defining ModelNew"));
}

static void test_cpp_block_ignored(void)
{
    const char *text = "```python\n" MODEL "```\n"
                       "```cpp\nclass ModelNew(nn.Module):\n    pass\n```\n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.block_index == 0);
    KG_CHECK(R.blocks_found == 2);

    KG_CHECK(ex("```cuda\n" MODEL "```\n") == KG_ERR_INVALID);
    KG_CHECK(R.code == NULL);
    KG_CHECK(has(E.message, "```cuda block does"));
    KG_CHECK(has(E.message, "tag the module ```python"));
}

static void test_blocks_without_modelnew(void)
{
    KG_CHECK(ex("```python\nclass Model(nn.Module):\n    pass\n```\n```text\nhi\n```\n"
                "```\nclass ModelNewer(nn.Module):\n    pass\n```\n") == KG_ERR_INVALID);
    KG_CHECK(E.code == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "3 fenced blocks found"));
    KG_CHECK(R.blocks_found == 3); /* kept on failure for logging */
    KG_CHECK(R.code == NULL);
    KG_CHECK(has(E.message, "2 python or untagged, 1 tagged with another language"));
    KG_CHECK(has(E.message, "none defines `class ModelNew`"));
}

static void test_modelnew_line_forms(void)
{
    KG_CHECK(ex("```python\nclass ModelNew:\n    pass\n```") == KG_OK);
    KG_CHECK(ex("```python\nclass  ModelNew  (nn.Module):\n    pass\n```") == KG_OK);
    KG_CHECK(ex("```python\n# class ModelNew(nn.Module)\nx = 'ModelNew'\n```") == KG_ERR_INVALID);
    KG_CHECK(ex("```python\nclass ModelNew2(nn.Module):\n    pass\n```") == KG_ERR_INVALID);
}

static void test_marker_to_end(void)
{
    KG_CHECK(ex("I will write the kernel.\n\n# Kernel Implementation\n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.source == KG_EXTRACT_MARKER);
    KG_CHECK(R.block_index == -1);
    KG_CHECK(has(R.detail, "# Kernel Implementation"));
    /* Case-insensitive, heading-style and trailing colon accepted. */
    KG_CHECK(ex("Plan.\n## kernel IMPLEMENTATION:  \n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    /* Not a marker line: text after it on the line. */
    KG_CHECK(ex("Plan.\n# Kernel Implementation details follow\nthe end") == KG_ERR_INVALID);
}

static void test_marker_up_to_closing_fence(void)
{
    KG_CHECK(ex("# Kernel Implementation\n" MODEL "```\nThat's it.\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.source == KG_EXTRACT_MARKER);
    KG_CHECK(R.blocks_found == 0);
    /* A fence right after the marker opens a normal block. */
    KG_CHECK(ex("# Kernel Implementation\n```python\n" MODEL "```\n") == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("# Kernel Implementation\nimport torch\n") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "Kernel Implementation` marker was found"));
}

static void test_chat_template_debris(void)
{
    KG_CHECK(ex("<|im_start|>assistant\n```python\n" MODEL "```<|im_end|>\n<|endoftext|>") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(has(R.detail, "last assistant turn"));
    KG_CHECK(ex("<|begin_of_text|><|start_header_id|>assistant<|end_header_id|>\n\n" MODEL
                "<|eot_id|>") == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_RAW);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("<s>```python\n" MODEL "```</s>") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    /* A token glued to the last code line is removed, not kept in the code. */
    KG_CHECK(ex("```python\n" MODEL "        pass<|im_end|>\n```") == KG_OK);
    KG_CHECK(!has(R.code, "<|"));
    /* DeepSeek's full-width bars. */
    KG_CHECK(ex("<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>```python\n" MODEL "```<\xEF\xBD\x9C"
                "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("<|im_end|>\n<|endoftext|>  \n") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "only chat-template tokens"));
}

static void test_last_assistant_turn(void)
{
    /* The prompt's example ModelNew must not win over the answer. */
    const char *text = "<|im_start|>user\nExample:\n```python\nclass ModelNew(nn.Module):\n"
                       "    example = 1\n```\nWrite yours.<|im_end|>\n<|im_start|>assistant\n" MODEL
                       "<|im_end|>\n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_RAW);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("<|im_start|>user\n```python\n" MODEL "```<|im_end|>\n<|im_start|>assistant\n"
                "<|im_end|>") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "last assistant turn is empty"));
}

static void test_think_section_skipped(void)
{
    const char *text = "<think>\nMaybe:\n```python\nclass ModelNew(nn.Module):\n    draft = 1\n```\n"
                       "</think>\nFinal answer:\n```python\n" MODEL "```\n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(!R.from_think);
    KG_CHECK(R.blocks_found == 1);
    /* Code after the think section that lacks ModelNew: the draft is not taken. */
    KG_CHECK(ex("<think>```python\n" MODEL "```</think>\n```python\nprint(1)\n```") ==
             KG_ERR_INVALID);
    KG_CHECK(has(E.message, "1 fenced block found"));
}

static void test_think_only_code(void)
{
    KG_CHECK(ex("<think>\nLet me write it.\n```python\n" MODEL "```\nhmm") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.from_think == 1);
    KG_CHECK(has(R.detail, "inside the <think> section"));
    /* Closed section followed by prose only: still tried. */
    KG_CHECK(ex("<thinking>```python\n" MODEL "```</thinking>\nDone, see above.") == KG_OK);
    KG_CHECK(R.from_think == 1);
    /* "</think>" with no opening: the reply began inside the reasoning. */
    KG_CHECK(ex("draft:\nclass ModelNew(nn.Module):\n    draft = 1\n</think>\n```python\n" MODEL
                "```") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("<think>I do not know.</think>") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "nothing outside its <think> section"));
    KG_CHECK(ex("<think></think>\n") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "empty <think> section"));
}

static void test_unterminated_fence(void)
{
    KG_CHECK(ex("Sure:\n```python\n" MODEL "\n\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.source == KG_EXTRACT_UNTERMINATED);
    KG_CHECK(R.blocks_found == 1);
    KG_CHECK(R.block_index == 0);
    KG_CHECK(has(R.detail, "unterminated"));
    KG_CHECK(ex("```python\nimport torch\n") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "never closed"));
}

static void test_crlf_and_cr(void)
{
    KG_CHECK(ex("```python\r\nimport torch\r\nclass ModelNew(nn.Module):\r\n    pass\r\n```\r\n") ==
             KG_OK);
    KG_CHECK_STR(R.code, "import torch\nclass ModelNew(nn.Module):\n    pass\n");
    KG_CHECK(ex("```python\rimport torch\rclass ModelNew:\r    pass\r```") == KG_OK);
    KG_CHECK_STR(R.code, "import torch\nclass ModelNew:\n    pass\n");
}

static void test_tabs_preserved(void)
{
    KG_CHECK(ex("```python\nclass ModelNew(nn.Module):\n\tdef forward(self, x):\n\t\treturn x\t# id\n```") ==
             KG_OK);
    KG_CHECK_STR(R.code, "class ModelNew(nn.Module):\n\tdef forward(self, x):\n\t\treturn x\t# id\n");
}

static void test_normalised_ends(void)
{
    KG_CHECK(ex("```python\n\n  \n\xEF\xBB\xBF" "class ModelNew:\n    s = '''a  \n  '''  \n\n \t\n\n```") == KG_OK);
    KG_CHECK_STR(R.code, "class ModelNew:\n    s = '''a  \n  '''\n");
    /* "pass```" is not a fence line, so the block never closes. */
    KG_CHECK(ex("```python\nclass ModelNew:\n    pass```") == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_UNTERMINATED);
    KG_CHECK_STR(R.code, "class ModelNew:\n    pass```\n");
    KG_CHECK(ex("\xEF\xBB\xBF```python\nclass ModelNew:\n    pass\n```") == KG_OK);
    KG_CHECK_STR(R.code, "class ModelNew:\n    pass\n");
}

static void test_raw_no_fence(void)
{
    KG_CHECK(ex(MODEL) == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_RAW);
    KG_CHECK(R.blocks_found == 0);
    KG_CHECK(R.block_index == -1);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("Sure! Here it is.\nHope it helps:\n\n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(has(R.detail, "2 leading prose lines dropped"));
    KG_CHECK(ex("import torch\nx = torch.ones(3)\n") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "looks like Python, but does not define `class ModelNew`"));
    /* A module that opens with its docstring (one line of which reads like an import) or with `try:` over an
     * indented import is taken whole, not from that inner line. */
    KG_CHECK(ex("\"\"\"ReLU in Triton.\nfrom the reference: y = max(x, 0)\n\"\"\"\n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, "\"\"\"ReLU in Triton.\nfrom the reference: y = max(x, 0)\n\"\"\"\n" MODEL);
    KG_CHECK(ex("r'''Doc.'''\n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, "r'''Doc.'''\n" MODEL);
    KG_CHECK(ex("try:\n    from triton.language.extra.cuda import libdevice\nexcept ImportError:\n    pass\n" MODEL) ==
             KG_OK);
    KG_CHECK_STR(R.code, "try:\n    from triton.language.extra.cuda import libdevice\nexcept ImportError:\n    pass\n" MODEL);
    /* Prose first is still dropped, and a reply whose whole module is indented still comes out dedented. */
    KG_CHECK(ex("Here you go:\ntry: this\n" MODEL) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(ex("Code:\n    import torch\n    class ModelNew:\n        pass\n") == KG_OK);
    KG_CHECK_STR(R.code, "import torch\nclass ModelNew:\n    pass\n");
}

static void test_empty_input(void)
{
    KG_CHECK(ex("") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "the reply is empty"));
    KG_CHECK(R.code == NULL);
    KG_CHECK(ex(" \n\r\n\t ") == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "the reply is empty"));
    kg_extract_result r;
    KG_CHECK(kg_extract_candidate(NULL, 0, &r, &E) == KG_ERR_INVALID);
    KG_CHECK(kg_extract_candidate(NULL, 5, &r, &E) == KG_ERR_INVALID);
    KG_CHECK(kg_extract_candidate("x", 1, NULL, &E) == KG_ERR_INVALID);
    KG_CHECK(kg_extract_candidate("x", 1, &r, NULL) == KG_ERR_INVALID); /* err is optional */
    kg_extract_result_free(&r);
    kg_extract_result_free(&r);
    kg_extract_result_free(NULL);
}

static void test_prose_only(void)
{
    KG_CHECK(ex("I am sorry, but I cannot write a Triton kernel for this operation.\n") ==
             KG_ERR_INVALID);
    KG_CHECK(has(E.message, "no code found"));
    KG_CHECK(has(E.message, "no ``` fenced block"));
    KG_CHECK(has(E.message, "does not look like Python"));
}

static void test_nul_byte(void)
{
    const char text[] = "```python\nclass ModelNew:\n\0    pass\n```\n";
    KG_CHECK(ex_n(text, sizeof text - 1) == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "NUL byte"));
    KG_CHECK(has(E.message, "offset 26"));
}

static void test_not_nul_terminated(void)
{
    /* The buffer ends right after the closing fence, with no NUL: ASan
     * flags any read past len. */
    const char *src = "```python\nclass ModelNew:\n    pass\n```";
    size_t n = strlen(src);
    char *buf = malloc(n);
    memcpy(buf, src, n);
    KG_CHECK(ex_n(buf, n) == KG_OK);
    KG_CHECK_STR(R.code, "class ModelNew:\n    pass\n");
    for (size_t k = 0; k <= n; k++) { /* every prefix, also unterminated */
        char *b = malloc(k ? k : 1);
        memcpy(b, src, k);
        int rc = ex_n(b, k);
        KG_CHECK(rc == KG_OK || rc == KG_ERR_INVALID);
        free(b);
    }
    free(buf);
}

static void test_indented_fences(void)
{
    const char *text = "1. Write the kernel:\n\n   ```python   \n   import torch\n\n   class ModelNew(nn.Module):\n"
                       "       def forward(self, x):\n           return x\n   ```  \n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK_STR(R.code, "import torch\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                         "        return x\n");
    KG_CHECK(has(R.detail, "common indentation of 3 removed"));
}

static void test_tilde_fences(void)
{
    KG_CHECK(ex("~~~python\n" MODEL "~~~\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(has(R.detail, "~~~python block"));
    /* A ``` line does not close a ~~~ block; a longer ~~~~ does. */
    KG_CHECK(ex("~~~\n" MODEL "```\nx = 1\n~~~~\n") == KG_OK);
    KG_CHECK(has(R.code, "```\nx = 1\n"));
    /* Four-backtick outer fence holding a ``` example. */
    KG_CHECK(ex("````\n" MODEL "# ```\n````\n") == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
}

static void test_fence_in_python_string(void)
{
    /* A ``` line inside a triple-quoted docstring is string content: the
     * block closes at the fence after the string. */
    const char *text = "```python\nclass ModelNew(nn.Module):\n    \"\"\"Use it like\n    ```\n"
                       "    m = ModelNew()\n    ```\n    \"\"\"\n    x = '```'  # \"\"\" in a comment\n```\n"
                       "Done.\n";
    KG_CHECK(ex(text) == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
    KG_CHECK(R.blocks_found == 1);
    KG_CHECK(has(R.code, "    m = ModelNew()\n    ```\n    \"\"\"\n    x = '```'"));
    KG_CHECK(!has(R.code, "Done."));
    /* An unbalanced """ would swallow the close to the end of the text; then
     * the first closing fence closes the block (markdown's rule). */
    KG_CHECK(ex("```python\nclass ModelNew:\n    s = \"\"\"oops\n```\nprose\n") == KG_OK);
    KG_CHECK_STR(R.code, "class ModelNew:\n    s = \"\"\"oops\n");
    KG_CHECK(R.source == KG_EXTRACT_FENCED);
}

static void test_implicit_close(void)
{
    KG_CHECK(ex("```python\nimport torch\n```python\n" MODEL "```\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(R.blocks_found == 2);
    KG_CHECK(R.block_index == 1);
    KG_CHECK(ex("```python\n" MODEL "```text\nsample output\n```\n") == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    KG_CHECK(has(R.detail, "closed by the next fence"));
}

static void test_inline_backticks_not_fence(void)
{
    KG_CHECK(ex("Use ```python``` blocks.\n" MODEL) == KG_OK);
    KG_CHECK(R.source == KG_EXTRACT_RAW);
    KG_CHECK(R.blocks_found == 0);
    KG_CHECK_STR(R.code, MODEL);
}

static void test_source_names(void)
{
    KG_CHECK_STR(kg_extract_source_name(KG_EXTRACT_FENCED), "fenced_block");
    KG_CHECK_STR(kg_extract_source_name(KG_EXTRACT_MARKER), "marker");
    KG_CHECK_STR(kg_extract_source_name(KG_EXTRACT_UNTERMINATED), "unterminated_fence");
    KG_CHECK_STR(kg_extract_source_name(KG_EXTRACT_RAW), "raw");
    KG_CHECK_STR(kg_extract_source_name((kg_extract_source)0), "unknown");
}

/* Builds a reply of about `size` bytes by repeating unit, with a final block. */
static char *repeat(const char *unit, size_t size, const char *tail, size_t *len)
{
    size_t ul = strlen(unit), tl = strlen(tail), n = 0;
    char *b = malloc(size + ul + tl + 1);
    while (n + ul <= size) {
        memcpy(b + n, unit, ul);
        n += ul;
    }
    memcpy(b + n, tail, tl);
    n += tl;
    b[n] = '\0';
    *len = n;
    return b;
}

static void test_very_long_input(void)
{
    size_t n;
    char *b = repeat("Some prose that goes on and on about kernels.\n", 4u << 20,
                     "```python\n" MODEL "```\n", &n);
    KG_CHECK(ex_n(b, n) == KG_OK);
    KG_CHECK_STR(R.code, MODEL);
    free(b);
    /* Over 16 MiB: rejected with the reason, without reading it all. */
    b = malloc(KG_EXTRACT_MAX_INPUT + 1);
    memset(b, 'a', KG_EXTRACT_MAX_INPUT + 1);
    KG_CHECK(ex_n(b, KG_EXTRACT_MAX_INPUT + 1) == KG_ERR_INVALID);
    KG_CHECK(has(E.message, "16 MiB"));
    free(b);
}

/* Each 4 MiB adversarial input must finish fast: quadratic behaviour would
 * take minutes.  The bound is loose for slow sanitizer builds. */
static void test_pathological_inputs_linear(void)
{
    static const char *const units[] = {
        "```\n", "```python\n'''\n", "```python\n\"\"\"\n```\n", "<think>", "</think>",
        "<think>\n```\n", "<|", "<|aaaaaaaa", "# Kernel Implementation\n",
        "# Kernel Implementation\n```\n", "class ModelNew(\n", "~~~\n````\n", "```py\nx\n",
        "'\\", "\r", "\"\"\"```\n", "<\xEF\xBD\x9C", " \t", "```python\nclass ModelNew:\n",
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t n;
        char *b = repeat(units[i], 4u << 20, "", &n);
        clock_t t0 = clock();
        int rc = ex_n(b, n);
        double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
        KG_CHECK(rc == KG_OK || rc == KG_ERR_INVALID);
        if (s > 3.0)
            fprintf(stderr, "  unit %zu took %.2fs\n", i, s);
        KG_CHECK(s < 3.0);
        free(b);
    }
}

/* ------------------------------------------------------ property test */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t xorshift(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

static const char *const fixtures[] = {
    "Here:\n```python\n" MODEL "```\nUsage:\n```python\nm = ModelNew()\n```\n",
    "<|im_start|>assistant\n<think>draft\n```python\nclass ModelNew:\n    pass\n```\n</think>\n"
    "```py\n" MODEL "```<|im_end|>",
    "# Kernel Implementation\r\n" MODEL "```\r\n",
    "~~~python\nclass ModelNew(nn.Module):\n    \"\"\"doc\n    ```\n    \"\"\"\n\tpass\n~~~\n",
    MODEL,
    "1. step\n   ```\n   class ModelNew:\n       x = 1\n   ```\n```cpp\nint x;\n```\n",
};

static void test_fuzz_property(void)
{
    static const char *const inserts[] = {"```", "~~~", "\r", "\n", "`", "```python\n", "<think>",
                                          "</think>", "<|im_end|>", "\"\"\"", "'", "#",
                                          "# Kernel Implementation\n", "class ModelNew:", "\t",
                                          "\xEF\xBB\xBF", "<|im_start|>assistant\n"};
    size_t cap = 1 << 14;
    char *buf = malloc(cap);
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *f = fixtures[xorshift() % (sizeof fixtures / sizeof fixtures[0])];
        size_t n = strlen(f);
        memcpy(buf, f, n);
        int edits = 1 + (int)(xorshift() % 8);
        for (int k = 0; k < edits; k++) {
            size_t at = n ? (size_t)(xorshift() % (n + 1)) : 0;
            switch (xorshift() % 5) {
            case 0: /* random byte (never NUL: that case is one error path) */
                if (n + 1 < cap) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = (char)(1 + xorshift() % 255);
                    n++;
                }
                break;
            case 1: { /* deletion of a short run */
                size_t d = (size_t)(xorshift() % 16);
                if (at + d > n)
                    d = n - at;
                memmove(buf + at, buf + at + d, n - at - d);
                n -= d;
                break;
            }
            case 2: { /* structural insertion */
                const char *s = inserts[xorshift() % (sizeof inserts / sizeof inserts[0])];
                size_t sl = strlen(s);
                if (n + sl < cap) {
                    memmove(buf + at + sl, buf + at, n - at);
                    memcpy(buf + at, s, sl);
                    n += sl;
                }
                break;
            }
            case 3: /* truncation */
                n = at;
                break;
            default: /* byte flip */
                if (at < n)
                    buf[at] = (char)(buf[at] ^ (1 << (xorshift() % 8)));
                break;
            }
        }
        /* Exact-size copy so ASan sees any read past len. */
        char *in = malloc(n ? n : 1);
        memcpy(in, buf, n);
        int rc = ex_n(in, n);
        int nul = n && memchr(in, '\0', n) != NULL;
        free(in);
        if (rc != KG_OK && rc != KG_ERR_INVALID) {
            bad++;
            continue;
        }
        if (rc == KG_ERR_INVALID) {
            if (E.message[0] == '\0' || R.code != NULL)
                bad++;
            continue;
        }
        ok++;
        if (nul || !R.code || R.code_len == 0 || R.code_len != strlen(R.code) ||
            !strstr(R.code, "ModelNew") || strchr(R.code, '\r') ||
            R.code[R.code_len - 1] != '\n' || (R.code_len >= 2 && R.code[R.code_len - 2] == '\n') ||
            R.detail[0] == '\0') {
            if (bad < 5)
                fprintf(stderr, "  property failed at iteration %d: %s\n", iter, R.detail);
            bad++;
        }
    }
    free(buf);
    KG_CHECK(bad == 0);
    KG_CHECK(ok > 1000); /* the mutations leave many inputs usable */
    printf("     fuzz_property: %d of 20000 mutated inputs extracted\n", ok);
    kg_extract_result_free(&R);
}

static const kg_test_case cases[] = {
    {"single_block_tagged", test_single_block_tagged},
    {"single_block_untagged", test_single_block_untagged},
    {"python_tag_variants", test_python_tag_variants},
    {"last_block_defining_modelnew", test_last_block_defining_modelnew},
    {"cpp_block_ignored", test_cpp_block_ignored},
    {"blocks_without_modelnew", test_blocks_without_modelnew},
    {"modelnew_line_forms", test_modelnew_line_forms},
    {"marker_to_end", test_marker_to_end},
    {"marker_up_to_closing_fence", test_marker_up_to_closing_fence},
    {"chat_template_debris", test_chat_template_debris},
    {"last_assistant_turn", test_last_assistant_turn},
    {"think_section_skipped", test_think_section_skipped},
    {"think_only_code", test_think_only_code},
    {"unterminated_fence", test_unterminated_fence},
    {"crlf_and_cr", test_crlf_and_cr},
    {"tabs_preserved", test_tabs_preserved},
    {"normalised_ends", test_normalised_ends},
    {"raw_no_fence", test_raw_no_fence},
    {"empty_input", test_empty_input},
    {"prose_only", test_prose_only},
    {"nul_byte", test_nul_byte},
    {"not_nul_terminated", test_not_nul_terminated},
    {"indented_fences", test_indented_fences},
    {"tilde_fences", test_tilde_fences},
    {"fence_in_python_string", test_fence_in_python_string},
    {"implicit_close", test_implicit_close},
    {"inline_backticks_not_fence", test_inline_backticks_not_fence},
    {"source_names", test_source_names},
    {"very_long_input", test_very_long_input},
    {"pathological_inputs_linear", test_pathological_inputs_linear},
    {"fuzz_property", test_fuzz_property},
};

KG_TEST_MAIN("extract", cases)
