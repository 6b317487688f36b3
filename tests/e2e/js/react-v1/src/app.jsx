import React from "react";
import { createRoot } from "react-dom/client";
import { CopilotKit } from "@copilotkit/react-core";
import { CopilotChat } from "@copilotkit/react-ui";
import "@copilotkit/react-ui/styles.css";

const runtimeUrl = new URLSearchParams(window.location.search).get("runtime");
createRoot(document.getElementById("root")).render(
  <CopilotKit runtimeUrl={runtimeUrl} showDevConsole={false}>
    <CopilotChat />
  </CopilotKit>
);
