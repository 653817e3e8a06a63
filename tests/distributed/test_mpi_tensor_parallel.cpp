// Tensor-parallel ranks as processes (#16 item 3 under mpirun): `mpirun -np T runtime ... -tp T` runs rank 0's engine
// (frontend, scheduler, KV cache) with its share of every layer's heads and feed-forward columns, and each other
// rank's share in a process of its own; after each row-parallel matmul their partial sums meet through MPI and are
// added in rank order, as the ranks of one process add them. So the processes must give one process's -tp T bit for
// bit — tokens and logprobs — on every placement of each rank's weights and KV (offload, streaming, tiers, swap
// preemption, the prefix store); a rank that hangs fails the request in flight naming it, and launches whose process
// count or split cannot work are refused saying how to mend them.
#include "mpi_launch.hpp"

using namespace strata_mpi_test;

namespace {

// 8 heads of 32 over 4 KV heads (make-model, random weights): splits two and four ways.
const std::string &four_kv_heads_model() {
    static const std::string path = made_model(
        "test-mpi-tp-kv4-q8_0.gguf",
        "--dim 256 --layers 4 --heads 8 --kv-heads 4 --ff 512 --ctx 256 --type q8_0 --seed 11");
    return path;
}

// A Qwen3-MoE-shaped mixture: 8 experts of 128 columns, 2 per token; each rank holds half of every expert's columns.
const std::string &experts_model() {
    static const std::string path = made_model(
        "test-mpi-tp-qwen3moe-q8_0.gguf", "--arch qwen3moe --dim 128 --layers 4 --heads 4 --kv-heads 2 --ff 256 "
                                          "--experts 8 --experts-used 2 --expert-ff 128 --ctx 256 --type q8_0 --seed 11");
    return path;
}

} // namespace

TEST(MpiTensorParallel, RanksAsProcessesGiveOneProcesssTokensOnEveryPlacement) {
    SKIP_WITHOUT_MPI();
    // stories260K: two ranks give one process's tokens without tensor parallel too (as the ranks in one process do).
    const std::vector<int> reference = one_process(k_model, "");
    ASSERT_EQ(reference.size(), 24u);
    EXPECT_EQ(processes(2, k_model, "", "-tp"), reference);
    for (const std::string &model : {q8_model(), four_kv_heads_model()}) {
        SCOPED_TRACE(model);
        const std::vector<int> tp2 = one_process(model, "-tp 2");
        ASSERT_EQ(tp2.size(), 24u);
        EXPECT_EQ(processes(2, model, "", "-tp"), tp2);
        // Each rank plans and places its own share: offloaded to a tier and computed there, streamed through the
        // prefetch ring, copied out of the mapping.
        EXPECT_EQ(processes(2, model, "--cpu-offload-layers 3 --stream-weights --tiers numa_ram", "-tp"), tp2);
        EXPECT_EQ(processes(2, model, "-ngl 1", "-tp"), tp2);
        EXPECT_EQ(processes(2, model, "--no-mmap --enable-cpu-prefetch false", "-tp"), tp2);
    }
    // A mixture of experts (ABI 1.30: the experts split by their inner columns), in place and streamed.
    const std::vector<int> experts_tp2 = one_process(experts_model(), "-tp 2");
    ASSERT_EQ(experts_tp2.size(), 24u);
    EXPECT_EQ(processes(2, experts_model(), "", "-tp"), experts_tp2);
    EXPECT_EQ(processes(2, experts_model(), "--cpu-offload-layers 3 --stream-weights --tiers numa_ram", "-tp"),
              experts_tp2);
    // Four ranks on this 2-core machine: a thread each (-t 4; the ranks compute at the same time).
    EXPECT_EQ(processes(4, four_kv_heads_model(), "-t 4", "-tp"), one_process(four_kv_heads_model(), "-tp 4 -t 4"));
    // A KV type of its own on every rank (the reference is one process's with it).
    for (const char *kv : {"--kv-cache-dtype f16", "--kv-cache-dtype q8_0"})
        EXPECT_EQ(processes(2, q8_model(), kv, "-tp"), one_process(q8_model(), std::string("-tp 2 ") + kv)) << kv;
}

// The OpenAI server with two tensor-parallel ranks as processes under load: a KV cache too small for the requests at
// once, so the scheduler swaps sequences out to the host tier and back (each rank moving its heads' share of every
// block); every answer and every logprob equals one process's with -tp 2, and every KV block is back in its pool.
// Then four ranks' logprobs against one process's -tp 4.
TEST(MpiTensorParallel, AServerOfRanksUnderSwapPreemptionAnswersAsOneProcessBitForBit) {
    SKIP_WITHOUT_MPI();
    const std::vector<std::string> prompts = {"Once upon a time", "Lily went to", "The cat", "Tom had a big",
                                              "One day, a bird", "Sue and Ben"};
    const std::vector<std::string> flags = {"serve",  k_model, "--device", "cpu", "--block-size", "4",
                                            "--kv-cache-memory", "40KiB", "--max-num-seqs", "6",
                                            "--preemption-mode", "swap", "--swap-space", "0.01",
                                            "--no-enable-prefix-caching", "-tp", "2"};
    const served alone = serve_and_ask({}, flags, prompts, 40, {}, 3);
    const served ranks = serve_and_ask({k_mpiexec, "-np", "2"}, flags, prompts, 40, {}, 3);
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_GT(alone.texts[i].size(), 100u) << alone.texts[i];
        EXPECT_NE(alone.texts[i].find("\"top_logprobs\""), std::string::npos) << alone.texts[i];
        EXPECT_EQ(ranks.texts[i], alone.texts[i]) << prompts[i];
    }
    EXPECT_GT(ranks.preemptions, 0.0) << "the KV cache was meant to be too small for every request at once";
    // Four ranks (a thread each): the rank order of the sum matters from three on (a + b is b + a), and the logprobs
    // show its last bits.
    const std::vector<std::string> four = {"serve", k_model, "--device", "cpu", "-tp", "4", "-t", "4"};
    const std::vector<std::string> some(prompts.begin(), prompts.begin() + 3);
    const served alone4 = serve_and_ask({}, four, some, 24, {}, 3);
    const served ranks4 = serve_and_ask({k_mpiexec, "-np", "4"}, four, some, 24, {}, 3);
    for (size_t i = 0; i < some.size(); ++i) {
        EXPECT_GT(alone4.texts[i].size(), 100u) << alone4.texts[i];
        EXPECT_EQ(ranks4.texts[i], alone4.texts[i]) << some[i];
    }
}

// The prefix store holds a tensor-parallel block as the ranks' head shares in turn, whoever wrote it: blocks written
// by two processes answer one process's -tp 2, and the other way round, with its tokens.
TEST(MpiTensorParallel, PrefixStoreBlocksWrittenByRanksAsProcessesReadBackInOneProcessAndBack) {
    SKIP_WITHOUT_MPI();
    const std::string prompt = " --prompt \"Once upon a time, there was a little girl named Lily. She loved to play "
                               "outside in the park with her friends and her dog\" --temperature 0 --max-tokens 12 "
                               "--output json --device cpu -tp 2 ";
    auto tokens = [&](const std::string &launch, const std::string &store, bool expect_entries) {
        const run_result r = run_shell(launch + k_runtime + " --model " + k_model + prompt + "--prefix-store-dir " + store);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.err.find(" (0 entries found)") == std::string::npos, expect_entries) << r.err;
        return r.exit_code == 0 ? json::parse(r.out)["completion_tokens"].get<std::vector<int>>() : std::vector<int>{};
    };
    const std::string a = STRATA_BINARY_DIR "/test-mpi-tp-store-a", b = STRATA_BINARY_DIR "/test-mpi-tp-store-b";
    fs::remove_all(a);
    fs::remove_all(b);
    const std::vector<int> reference = tokens("", a, false);
    ASSERT_EQ(reference.size(), 12u);
    EXPECT_EQ(tokens(mpirun(2), b, false), reference); // written by two processes
    EXPECT_EQ(tokens("", b, true), reference);         // read by one
    EXPECT_EQ(tokens(mpirun(2), a, true), reference);  // and one's read by two
    fs::remove_all(a);
    fs::remove_all(b);
}

TEST(MpiTensorParallel, LaunchesThatCannotWorkAreRefusedSayingHowToMendThem) {
    SKIP_WITHOUT_MPI();
    // Every process is one rank: two processes for four ranks are refused, saying how to mend it.
    const run_result count = run_shell(mpirun(2) + k_runtime + " --model " + k_model + k_prompt + "-tp 4");
    EXPECT_NE(count.exit_code, 0);
    EXPECT_NE(count.err.find("mpirun started 2 processes but pipeline_parallel_size is 1 and tensor_parallel_size 4"),
              std::string::npos) << count.err;
    const run_result nested = run_shell(mpirun(4) + k_runtime + " --model " + k_model + k_prompt + "-tp 2 -pp 2");
    EXPECT_NE(nested.exit_code, 0);
    EXPECT_NE(nested.err.find("tensor-parallel ranks inside pipeline stages run in one process only so far"),
              std::string::npos)
        << nested.err;
    // A rank that opened another model: rank 0 names the rank and both fingerprints, and the job ends.
    const std::string other = std::string(STRATA_SHARED_DIR) + "/models/stories260K-q8_0.gguf";
    const run_result mixed = run_shell(k_mpiexec + " -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                       "-tp 2 : -np 1 " + k_runtime + " --model " + other + k_prompt + "-tp 2");
    EXPECT_NE(mixed.exit_code, 0);
    EXPECT_NE(mixed.err.find("tensor-parallel rank 1 of 2 could not start: "), std::string::npos) << mixed.err;
    EXPECT_NE(mixed.err.find("is not rank 0's model (fingerprints "), std::string::npos) << mixed.err;
    // A split the model cannot take (8 heads over 4 KV heads, 3 ranks: a thread each) is refused, naming it.
    const run_result uneven = run_shell(mpirun(3) + k_runtime + " --model " + k_model + k_prompt + "-tp 3 -t 3");
    EXPECT_NE(uneven.exit_code, 0);
    EXPECT_NE(uneven.err.find("tensor_parallel_size 3"), std::string::npos) << uneven.err;
}

// A rank that stops answering (SIGSTOP, as a hung process) in the middle of the ranks' forward: rank 0 waits for its
// partial sums no longer than the rank timeout, fails the request in flight naming the rank, and every rank ends —
// with four ranks too, where the other ranks time out waiting for it as rank 0 does and must leave rank 0 the time to
// answer.
TEST(MpiTensorParallel, ARankThatHangsFailsTheRequestInFlightNamingItAndEndsEveryRank) {
    SKIP_WITHOUT_MPI();
    for (const int n : {2, 4})
        expect_hung_rank_fails_request_and_ends_job(
            "-tp", n, {"tensor-parallel rank 1 sent no partial sums within 2 s: it hung or died"});
}

// A tensor-parallel rank that dies (SIGKILL) with a request in flight on it: the job ends at once, named in mpirun's
// log; the request gets no finished answer and no process is left.
TEST(MpiTensorParallel, ARankThatDiesWithARequestInFlightEndsTheJobNamingItAndLeavesNoProcess) {
    SKIP_WITHOUT_MPI();
    expect_killed_rank_ends_job("-tp", 2);
}

// A real fault on one rank: its weights' tier file truncated under the running server (mpi_launch.hpp,
// expect_truncated_tier_fails_steps_alone). The step fails on every rank and only that step, with the failing rank's
// reason, and the server goes on — for rank 1's file and rank 0's.
TEST(MpiTensorParallel, ARankWhoseTierFileIsTruncatedFailsTheStepAloneWithItsReasonAndTheServerGoesOn) {
    SKIP_WITHOUT_MPI();
    for (const int rank : {1, 0}) expect_truncated_tier_fails_steps_alone({"-tp", "2"}, rank, "tensor-parallel");
}
