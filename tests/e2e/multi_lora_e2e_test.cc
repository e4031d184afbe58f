// End-to-end: multi-LoRA traffic (`engine_config.lora`, `workload.lora`). Against the emulator:
// 8 adapters chosen by Zipf 1.1, the adapter each request named (as the emulator served it)
// counted per adapter and tested against the distribution (chi-square at 1%), the per-adapter
// figures in results.db, and the adapter loads beyond the slots in the rare adapters' TTFT.
// Against llama.cpp's server: two adapters (GGUF LoRA files this test writes for SmolLM2-135M)
// loaded with --lora and chosen per request through its `lora` field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

TEST(MultiLora, ZipfTrafficOverEightAdaptersIsServedAndCountedPerAdapter) {
  Harness h("multi-lora-sim");
  // 4 slots for 8 adapters: a request whose adapter is not among the 4 most recently used waits
  // 30 ms for its load (the fixed schedule's TTFT is 5 ms).
  const std::string matrix = h.WriteFile("m.yaml", R"(name: multi-lora
engine: sim
model: base-8b
sim: {ttft_ms: 5, itl_ms: 0.2, lora_load_ms: 30}
engine_config:
  lora: {adapters: {count: 8, name: "lora-{i}", path: "/adapters/lora-{i}"}, max_loras: 4}
workload: {input_len: 16, output_len: 4, num_requests: 2000, concurrency: 16,
           lora: {choice: zipf, skew: 1.1}}
)");
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  const auto counts = h.Query(h.Path("out"),
                              "SELECT adapter, COUNT(*), SUM(success) FROM requests "
                              "GROUP BY adapter ORDER BY CAST(SUBSTR(adapter, 6) AS INTEGER)");
  ASSERT_EQ(counts.rows.size(), 8u);
  double harmonic = 0;
  for (int k = 1; k <= 8; ++k) harmonic += std::pow(k, -1.1);
  double chi_square = 0;
  for (int k = 1; k <= 8; ++k) {
    const auto& row = counts.rows[k - 1];
    EXPECT_EQ(row[0], fmt::format("lora-{}", k));
    EXPECT_EQ(row[1], row[2]) << "every request the emulator served as its adapter";
    const double expected = 2000 * std::pow(k, -1.1) / harmonic;
    chi_square += std::pow(std::stod(row[1]) - expected, 2) / expected;
  }
  EXPECT_LT(chi_square, 18.48) << "7 degrees of freedom at 1%";
  // Per-adapter figures: every request in one adapter's row, and the rarest adapter (most often
  // evicted) slower to its first token than the most popular one (nearly always loaded).
  const auto figures = h.Query(h.Path("out"),
                               "SELECT adapter, requests, completed, ttft_mean_ms FROM "
                               "adapter_figures ORDER BY CAST(SUBSTR(adapter, 6) AS INTEGER)");
  ASSERT_EQ(figures.rows.size(), 8u);
  int total = 0;
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(figures.rows[k][1], counts.rows[k][1]);
    total += std::stoi(figures.rows[k][2]);
  }
  EXPECT_EQ(total, 2000);
  EXPECT_GT(std::stod(figures.rows[7][3]), std::stod(figures.rows[0][3]) + 5)
      << "lora-8 " << figures.rows[7][3] << " ms, lora-1 " << figures.rows[0][3] << " ms";
  // The same rows in report.md (and so report.html): one per adapter, with its request count.
  const std::string md = ReadTextFile(h.Path("out/report.md"));
  const size_t table = md.find("\n## Per adapter\n");
  ASSERT_NE(table, std::string::npos) << md;
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_NE(md.find(fmt::format(" | lora-{} | {} | ", k + 1, figures.rows[k][1]), table),
              std::string::npos)
        << md.substr(table);
  }
  EXPECT_NE(ReadTextFile(h.Path("out/report.html")).find("Per adapter"), std::string::npos);
}

// A GGUF LoRA adapter of `rank` for SmolLM2-135M's first attention query (576 x 576), the way
// llama.cpp's convert_lora_to_gguf.py writes one: general.type adapter, adapter.type lora, the
// alpha, and the A (ne [576, rank]) and B (ne [rank, 576]) tensors in F32.
void WriteLoraGguf(const std::string& path, uint32_t rank) {
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&out](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&out](uint64_t v) { out.write(reinterpret_cast<const char*>(&v), 8); };
  auto text = [&](const std::string& s) {
    u64(s.size());
    out.write(s.data(), static_cast<std::streamsize>(s.size()));
  };
  constexpr uint32_t kString = 8, kFloat32 = 6, kF32Tensor = 0, kEmbd = 576;
  out.write("GGUF", 4);
  u32(3);  // version
  u64(2);  // tensors
  u64(4);  // key-value pairs
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"general.architecture", "llama"},
                                                        {"general.type", "adapter"},
                                                        {"adapter.type", "lora"}}) {
    text(key);
    u32(kString);
    text(value);
  }
  text("adapter.lora.alpha");
  u32(kFloat32);
  const float alpha = static_cast<float>(rank);
  out.write(reinterpret_cast<const char*>(&alpha), 4);
  const uint64_t bytes = uint64_t{kEmbd} * rank * 4;
  text("blk.0.attn_q.weight.lora_a");
  u32(2);
  u64(kEmbd);
  u64(rank);
  u32(kF32Tensor);
  u64(0);
  text("blk.0.attn_q.weight.lora_b");
  u32(2);
  u64(rank);
  u64(kEmbd);
  u32(kF32Tensor);
  u64((bytes + 31) / 32 * 32);
  while (out.tellp() % 32 != 0) out.put('\0');
  for (int t = 0; t < 2; ++t) {
    for (uint64_t i = 0; i < bytes / 4; ++i) {
      const float v =
          0.01f * static_cast<float>(static_cast<int64_t>((i * 2654435761u) % 201) - 100) / 100;
      out.write(reinterpret_cast<const char*>(&v), 4);
    }
    while (out.tellp() % 32 != 0) out.put('\0');
  }
}

TEST(MultiLora, LlamacppServesTwoAdaptersChosenPerRequest) {
  if (!OnPath("llama-server") || !std::filesystem::exists(kSmolLm2Gguf)) {
    GTEST_SKIP() << "llama-server or " << kSmolLm2Gguf
                 << " is not installed: run scripts/install-engines.sh to run this test";
  }
  Harness h("multi-lora-llamacpp");
  WriteLoraGguf(h.Path("sql.gguf"), 8);
  WriteLoraGguf(h.Path("chat.gguf"), 4);
  const std::string matrix =
      h.WriteFile("m.yaml", fmt::format(R"(name: multi-lora
engine: llamacpp
model: smollm2-lora
engine_config:
  model_path: {}
  threads: 1
  context_len: 512
  lora: {{adapters: [{{name: sql, path: {}}}, {{name: chat, path: {}}}]}}
workload: {{api: completions, input_len: 8, output_len: 4, num_requests: 6, concurrency: 1,
           lora: {{choice: uniform}}}}
timeout_s: 120
max_attempts: 1
local: {{agents: 1, gpus_per_agent: 1}}
)",
                                        kSmolLm2Gguf, h.Path("sql.gguf"), h.Path("chat.gguf")));
  std::string output;
  ASSERT_EQ(RunServesweep(fmt::format("run {} --out {}", matrix, h.Path("out")), &output), 0)
      << output;
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM requests WHERE success = 1"), 6);
  EXPECT_EQ(
      h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM requests WHERE adapter IN ('sql', 'chat')"),
      6);
  EXPECT_EQ(h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM adapter_figures"), 2);
  // The server reports every request's cached prompt tokens (timings.cache_n).
  EXPECT_EQ(
      h.QueryInt(h.Path("out"), "SELECT COUNT(*) FROM requests WHERE cached_prompt_tokens >= 0"),
      6);
  // Both files on the server's command line (the engine log's first line), in the matrix's
  // order, which the requests' ids follow; a file llama.cpp could not load would have stopped it.
  std::string logs;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(h.Path("out/agents"))) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path());
    logs.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  EXPECT_NE(logs.find(fmt::format("--lora {},{}", h.Path("sql.gguf"), h.Path("chat.gguf"))),
            std::string::npos);
}

}  // namespace
}  // namespace servesweep::testing
