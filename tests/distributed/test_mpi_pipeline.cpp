// Pipeline ranks as processes (#16): `mpirun -np N runtime ... -pp N` runs rank 0's engine (frontend, scheduler, KV
// cache, the first layers) in one process and each other stage in a process of its own, the residual stream and the
// logits passing between them by MPI. Greedy tokens must be one process's, bit for bit, whatever the split and the
// placement of each rank's weights and KV (offload, streaming, tiers, swap preemption); start-up refuses a rank that
// opened another model, and a launch whose process count is not the pipeline's.
#include "mpi_launch.hpp"

#include <sys/stat.h>

using namespace strata_mpi_test;

TEST(MpiPipeline, RanksAsProcessesGiveOneProcesssGreedyTokensOnEverySplitAndPlacement) {
    SKIP_WITHOUT_MPI();
    for (const auto &[model, uneven] : {std::pair{k_model, "1,1,3"}, std::pair{q8_model(), "1,4,1"}}) {
        SCOPED_TRACE(model);
        const std::vector<int> reference = one_process(model, "");
        ASSERT_EQ(reference.size(), 24u);
        EXPECT_EQ(processes(2, model, ""), reference);
        EXPECT_EQ(processes(3, model, std::string("--pipeline-layer-partition ") + uneven), reference);
        // Each rank plans and places its own layers: offloaded to a tier and computed there, streamed through the
        // prefetch ring, on the KV type of every rank.
        EXPECT_EQ(processes(2, model, "--cpu-offload-layers 3 --stream-weights --tiers numa_ram"), reference);
        EXPECT_EQ(processes(2, model, "-ngl 1"), reference);
        EXPECT_EQ(processes(2, model, "--no-mmap --enable-cpu-prefetch false"), reference);
    }
    // A KV type of its own on every rank (the reference is one process's with it).
    for (const char *kv : {"--kv-cache-dtype f16", "--kv-cache-dtype q8_0"})
        EXPECT_EQ(processes(2, q8_model(), kv), one_process(q8_model(), kv)) << kv;
}

// The persistent prefix store holds whole blocks in the one-process layout whoever wrote them: blocks written by two
// ranks' processes (each sending its layers' part) answer one process, and the other way round, with its tokens.
TEST(MpiPipeline, PrefixStoreBlocksWrittenByRanksAsProcessesReadBackInOneProcessAndBack) {
    SKIP_WITHOUT_MPI();
    const std::string prompt = " --prompt \"Once upon a time, there was a little girl named Lily. She loved to play "
                               "outside in the park with her friends and her dog\" --temperature 0 --max-tokens 12 "
                               "--output json --device cpu ";
    auto tokens = [&](const std::string &launch, const std::string &store, bool expect_entries) {
        const run_result r = run_shell(launch + k_runtime + " --model " + k_model + prompt + "--prefix-store-dir " + store);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.err.find(" (0 entries found)") == std::string::npos, expect_entries) << r.err;
        if (!expect_entries) {
            EXPECT_NE(r.err.find("blocks written to " + store.substr(0, store.find(' '))), std::string::npos) << r.err;
        }
        return r.exit_code == 0 ? json::parse(r.out)["completion_tokens"].get<std::vector<int>>() : std::vector<int>{};
    };
    const std::string a = STRATA_BINARY_DIR "/test-mpi-store-a", b = STRATA_BINARY_DIR "/test-mpi-store-b";
    fs::remove_all(a);
    fs::remove_all(b);
    const std::vector<int> reference = tokens("", a, false);
    ASSERT_EQ(reference.size(), 12u);
    EXPECT_EQ(tokens(mpirun(2), b + " -pp 2", false), reference); // written by two processes
    EXPECT_EQ(tokens("", b, true), reference);                      // read by one
    EXPECT_EQ(tokens(mpirun(2), a + " -pp 2", true), reference);    // and one's read by two
    fs::remove_all(a);
    fs::remove_all(b);
}

TEST(MpiPipeline, EachRankSaysItsLayersAndTheRanksOnAHostShareItsMemory) {
    SKIP_WITHOUT_MPI();
    const run_result r = run_shell(mpirun(3) + k_runtime + " --model " + k_model + k_prompt +
                                   "-pp 3 --pipeline-layer-partition 1,1,3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("pipeline rank 0 of 3: layers [0, 1) on device 'cpu' (process on "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pipeline rank 1 of 3: layers [1, 2) on device 'cpu' (process on "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pipeline rank 2 of 3: layers [2, 5) on device 'cpu' (process on "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("pipeline rank 2 of 3: layers [2, 5) in its own process"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the 3 pipeline ranks on host "), std::string::npos) << r.err;
    // Each rank's `runtime topology` in the launch log.
    for (int rank = 0; rank < 3; ++rank) {
        const size_t at = r.err.find("pipeline rank " + std::to_string(rank) + " of 3 on host ");
        ASSERT_NE(at, std::string::npos) << r.err;
        EXPECT_NE(r.err.find("logical CPUs", at), std::string::npos) << r.err;
    }
    EXPECT_NE(r.err.find("(each plans 1/3 of its memory)"), std::string::npos) << r.err;
}

TEST(MpiPipeline, ARankThatOpenedAnotherModelOrAWrongProcessCountIsRefusedNamingIt) {
    SKIP_WITHOUT_MPI();
    // mpirun's MPMD form gives rank 1 another file: rank 0 names the rank and both fingerprints, and the job ends.
    const std::string other = std::string(STRATA_SHARED_DIR) + "/models/stories260K-q8_0.gguf";
    const run_result mixed = run_shell(k_mpiexec + " -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                       "-pp 2 : -np 1 " + k_runtime + " --model " + other + k_prompt + "-pp 2");
    EXPECT_NE(mixed.exit_code, 0);
    EXPECT_NE(mixed.err.find("pipeline rank 1 of 2 (layers [3, 5)) could not start: "), std::string::npos) << mixed.err;
    EXPECT_NE(mixed.err.find("is not rank 0's model (fingerprints "), std::string::npos) << mixed.err;
    // Settings that lay out the KV or size a step must be rank 0's on every rank (each reads its own command line).
    const run_result settings = run_shell(k_mpiexec + " -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                          "-pp 2 : -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                          "-pp 2 --block-size 8");
    EXPECT_NE(settings.exit_code, 0);
    EXPECT_NE(settings.err.find("[scheduler] block_size is 8 here but 16 on rank 0"), std::string::npos)
        << settings.err;
    // The context a sequence may reach, which a model may read (Phi-3's LongRoPE picks its factors by it).
    const run_result context = run_shell(k_mpiexec + " -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                         "-pp 2 : -np 1 " + k_runtime + " --model " + k_model + k_prompt +
                                         "-pp 2 --max-model-len 128");
    EXPECT_NE(context.exit_code, 0);
    EXPECT_NE(context.err.find("max_model_len is 128 here but 0 on rank 0"), std::string::npos) << context.err;
    // Every process is one rank: two processes for a one-rank pipeline are refused, saying how to mend it.
    const run_result count = run_shell(mpirun(2) + k_runtime + " --model " + k_model + k_prompt);
    EXPECT_NE(count.exit_code, 0);
    EXPECT_NE(count.err.find("mpirun started 2 processes but pipeline_parallel_size is 1 and tensor_parallel_size 1; "
                             "each process is one pipeline or tensor-parallel rank: pass --pipeline-parallel-size 2 "
                             "or --tensor-parallel-size 2"),
              std::string::npos) << count.err;
    const run_result dp = run_shell(mpirun(2) + k_runtime + " --model " + k_model + k_prompt + "-pp 2 -dp 2 -t 2");
    EXPECT_NE(dp.exit_code, 0);
    EXPECT_NE(dp.err.find("data-parallel replicas run in one process only"), std::string::npos) << dp.err;
    const run_result plan = run_shell(mpirun(2) + k_runtime + " plan --model " + k_model + " -pp 2");
    EXPECT_NE(plan.exit_code, 0);
    EXPECT_NE(plan.err.find("runtime plan under mpirun: run it as one process"), std::string::npos) << plan.err;
}

// A rank that hangs while it loads (here: its model "file" a FIFO no one writes, as a stalled network filesystem):
// start-up waits for it no longer than [parallel] rank_start_timeout_s (or vLLM's VLLM_ENGINE_READY_TIMEOUT_S), then
// fails naming the rank, and the job ends; pipeline and tensor-parallel ranks alike.
TEST(MpiPipeline, ARankThatHangsWhileLoadingFailsStartUpNamingItWithinTheStartTimeout) {
    SKIP_WITHOUT_MPI();
    const std::string fifo = STRATA_BINARY_DIR "/test-mpi-hanging-model.gguf";
    fs::remove(fifo);
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    struct launch {
        const char *split, *setting, *env, *rank;
    };
    for (const launch &l : {launch{"-pp 2", " --rank-start-timeout 3", "", "pipeline"},
                            launch{"-tp 2", "", "VLLM_ENGINE_READY_TIMEOUT_S=3 ", "tensor-parallel"}}) {
        SCOPED_TRACE(l.split);
        const run_result r = run_shell(std::string(l.env) + k_mpiexec + " -np 1 " + k_runtime + " --model " + k_model +
                                       k_prompt + l.split + l.setting + " : -np 1 " + k_runtime + " --model " + fifo +
                                       k_prompt + l.split + l.setting);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.err.find(std::string(l.rank) + " rank 1 of 2 did not finish loading its share of the model within "
                                                   "3 s ([parallel] rank_start_timeout_s, --rank-start-timeout)"),
                  std::string::npos)
            << r.err;
    }
    fs::remove(fifo);
}

// The OpenAI server with two ranks as processes under load: a KV cache too small for the requests at once, so the
// scheduler swaps sequences out to the host tier and back (each rank moving its layers' part of every block); every
// answer equals one process's, and every KV block is back in its pool at the end.
TEST(MpiPipeline, AServerOfTwoRanksUnderSwapPreemptionAnswersAsOneProcess) {
    SKIP_WITHOUT_MPI();
    const std::vector<std::string> prompts = {"Once upon a time", "Lily went to", "The cat", "Tom had a big",
                                              "One day, a bird", "Sue and Ben"};
    const std::vector<std::string> flags = {"serve",  k_model, "--device", "cpu", "--block-size", "4",
                                            "--kv-cache-memory", "40KiB", "--max-num-seqs", "6",
                                            "--preemption-mode", "swap", "--swap-space", "0.01",
                                            "--no-enable-prefix-caching"};
    const served alone = serve_and_ask({}, flags, prompts, 40);
    std::vector<std::string> pp = flags;
    pp.insert(pp.end(), {"-pp", "2"});
    const served ranks = serve_and_ask({k_mpiexec, "-np", "2"}, pp, prompts, 40);
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_GT(alone.texts[i].size(), 20u) << alone.texts[i];
        EXPECT_EQ(ranks.texts[i], alone.texts[i]) << prompts[i];
    }
    EXPECT_GT(ranks.preemptions, 0.0) << "the KV cache was meant to be too small for every request at once";
}

// Prefix caching on: requests that share a cached prompt prefix each list its blocks in the step, so a step names
// more block references than the pools hold; the ranks take such steps as one process does.
TEST(MpiPipeline, RequestsSharingCachedPrefixBlocksAnswerAsOneProcess) {
    SKIP_WITHOUT_MPI();
    const std::string prefix = "Once upon a time, there was a little girl named Lily. She loved to play outside in "
                               "the park with her friends and her big dog";
    const std::vector<std::string> prompts = {prefix + ". One day", prefix + " Max.", prefix + ", and the cat",
                                              prefix + ". Then", prefix + ". She saw", prefix + " every day"};
    // 32 device blocks of 4 tokens, 16 tokens a step, no host tier: six sequences over one ~10-block prefix list
    // ~80 block references in a decode step against a reserve of 32 + 6.
    const std::vector<std::string> flags = {"serve", k_model, "--device", "cpu", "--block-size", "4",
                                            "--kv-cache-memory", "160KiB", "--max-num-seqs", "6",
                                            "--max-num-batched-tokens", "16", "--max-model-len", "100",
                                            "--swap-space", "0"};
    const served alone = serve_and_ask({}, flags, prompts, 12, prefix);
    std::vector<std::string> pp = flags;
    pp.insert(pp.end(), {"-pp", "2"});
    const served ranks = serve_and_ask({k_mpiexec, "-np", "2"}, pp, prompts, 12, prefix);
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_GT(alone.texts[i].size(), 8u) << alone.texts[i];
        EXPECT_EQ(ranks.texts[i], alone.texts[i]) << prompts[i];
    }
}

// A rank that stops answering (here: stopped by SIGSTOP, as a hung process) fails the request in flight with the
// reason instead of leaving its client waiting, and every rank then ends, with the reason in the log.
TEST(MpiPipeline, ARankThatHangsFailsTheRequestInFlightNamingTheTimeoutAndEndsEveryRank) {
    SKIP_WITHOUT_MPI();
    // Rank 0 notices at whichever message the rank stopped taking or answering (MPI buffers small ones).
    expect_hung_rank_fails_request_and_ends_job("-pp", 2, {"within 2 s", "hung or died"});
}

// A rank that dies (SIGKILL) with a request in flight on it ends the job at once, named in mpirun's log; the request
// gets no finished answer and no process is left (mpi_launch.hpp, expect_killed_rank_ends_job).
TEST(MpiPipeline, ARankThatDiesWithARequestInFlightEndsTheJobNamingItAndLeavesNoProcess) {
    SKIP_WITHOUT_MPI();
    expect_killed_rank_ends_job("-pp", 2);
}

// A real fault on one stage: its weights' tier file truncated under the running server (the stage holds four of the
// five layers, so that its ring of one layer ahead reads them again every token). The step fails alone, with that
// rank's reason: rank 1 sends its number on in place of the logits, then its reason; rank 0's layers send zeros on
// and drop the logits that come back. The server goes on.
TEST(MpiPipeline, AStageWhoseTierFileIsTruncatedFailsTheStepAloneWithItsReasonAndTheServerGoesOn) {
    SKIP_WITHOUT_MPI();
    expect_truncated_tier_fails_steps_alone({"-pp", "2", "--pipeline-layer-partition", "1,4"}, 1, "pipeline");
    expect_truncated_tier_fails_steps_alone({"-pp", "2", "--pipeline-layer-partition", "4,1"}, 0, "pipeline");
}

